from k8sdds.cli import main

main()
