/* k8sdds-discovery probe (probe.c): multicast probed where there is no Python. */
#ifndef K8SDDS_PROBE_H
#define K8SDDS_PROBE_H

/* argv[0] is "probe"; returns the exit status */
int probe_main(int argc, char **argv);

#endif
