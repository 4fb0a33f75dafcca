module k8sdds.local/engines/mqtt

go 1.22

require github.com/eclipse/paho.mqtt.golang v1.5.1
