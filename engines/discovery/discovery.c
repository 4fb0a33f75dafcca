/* k8sdds-discovery: how long one DDS participant takes to discover its peers, with Cyclone
 * DDS's own discovery (SPDP for participants, SEDP for readers and writers), and what that
 * discovery costs its network interface.
 *
 * Each participant of a test runs one: a participant with one writer and one reader on the
 * topic "k8sdds_discovery" (type k8sdds::Beat, beat.idl), ignoring its own. Discovery is
 * configured by CYCLONEDDS_URI as for ddsperf (multicast SPDP, or a unicast peers list).
 * From the program's start (before the participant exists) it records when it has seen
 * every peer participant (SPDP), and when its writer has matched every peer's reader and
 * its reader every peer's writer (SEDP): that is its discovery time. The interface's
 * counters (/sys/class/net/IFACE/statistics) are read at the start, at that moment, and
 * over a steady window after it: bytes and packets sent and received, during discovery
 * and at steady state.
 *
 * Usage: k8sdds-discovery -peers N -wait W -settle S -steady D [-iface IFACE] [-at T]
 *   N: the peers to match (the other participants); W: seconds to wait for them (exit 1
 *   when not matched by then); S: seconds to let the other participants finish theirs;
 *   D: the steady window, in seconds (a participant stays D + 2 * S seconds after it
 *   matched, so that its leaving never falls in another's window); IFACE: the interface
 *   DDS uses [the default route's]; T: the wall-clock instant (seconds since the epoch) all
 *   the participants start at, together (its start is then T, or when it started if later).
 *
 * Output, one fact a line (times in seconds from the program's start, CLOCK_MONOTONIC):
 *   k8sdds-discovery 1 cyclonedds VERSION
 *   start iface IFACE late L epoch E  (L: seconds after T it started, 0 without -at; E:
 *                                      its start on the wall clock, seconds since the epoch)
 *   participants T SEEN/N           (each time the number of peer participants changes)
 *   matched T READERS/N WRITERS/N   (each time a matched count changes)
 *   discovered T
 *   traffic discovery SECONDS TX_BYTES TX_PACKETS RX_BYTES RX_PACKETS
 *   traffic steady SECONDS TX_BYTES TX_PACKETS RX_BYTES RX_PACKETS
 *   timeout T READERS/N WRITERS/N   (instead of discovered, then exit status 1)
 *
 * `k8sdds-discovery probe ...` is the multicast probe instead (probe.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dds/dds.h"
#include "dds/version.h"
#include "beat.h"
#include "probe.h"

#define MAX_PARTICIPANTS 1024
#define TICK DDS_MSECS(20) /* the wait set's bound: a missed wake-up costs at most this */

struct counters {
  unsigned long long tx_bytes, tx_packets, rx_bytes, rx_packets;
};

static double t0;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double since_start(void) { return now() - t0; }

static double wall(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* wait for the wall-clock instant `at` (epoch seconds); how late it is once there */
static double start_at(double at)
{
  if (at <= 0)
    return 0;
  struct timespec ts = {.tv_sec = (time_t)at, .tv_nsec = (long)((at - (double)(time_t)at) * 1e9)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
  double late = wall() - at;
  return late > 0 ? late : 0;
}

static void fail(const char *what, dds_return_t rc)
{
  fprintf(stderr, "k8sdds-discovery: %s: %s\n", what, dds_strretcode(rc));
  exit(2);
}

static unsigned long long counter(const char *iface, const char *name)
{
  char path[256];
  unsigned long long value = 0;
  FILE *f;
  snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s", iface, name);
  if ((f = fopen(path, "r")) == NULL) {
    fprintf(stderr, "k8sdds-discovery: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  if (fscanf(f, "%llu", &value) != 1) {
    fprintf(stderr, "k8sdds-discovery: %s: not a number\n", path);
    exit(2);
  }
  fclose(f);
  return value;
}

static struct counters read_counters(const char *iface)
{
  struct counters c;
  c.tx_bytes = counter(iface, "tx_bytes");
  c.tx_packets = counter(iface, "tx_packets");
  c.rx_bytes = counter(iface, "rx_bytes");
  c.rx_packets = counter(iface, "rx_packets");
  return c;
}

static void print_traffic(const char *phase, double seconds, struct counters a,
                          struct counters b)
{
  printf("traffic %s %.6f %llu %llu %llu %llu\n", phase, seconds, b.tx_bytes - a.tx_bytes,
         b.tx_packets - a.tx_packets, b.rx_bytes - a.rx_bytes, b.rx_packets - a.rx_packets);
  fflush(stdout);
}

/* the peer participants alive now, from the built-in DCPSParticipant reader (itself left out) */
static int peer_participants(dds_entity_t reader, const dds_guid_t *self)
{
  static void *samples[MAX_PARTICIPANTS];
  static dds_sample_info_t infos[MAX_PARTICIPANTS];
  int peers = 0;
  memset(samples, 0, sizeof samples);
  dds_return_t n = dds_read_mask(reader, samples, infos, MAX_PARTICIPANTS, MAX_PARTICIPANTS,
                                 DDS_ANY_SAMPLE_STATE | DDS_ANY_VIEW_STATE |
                                 DDS_ALIVE_INSTANCE_STATE);
  if (n < 0)
    fail("reading DCPSParticipant", n);
  for (dds_return_t i = 0; i < n; i++) {
    const dds_builtintopic_participant_t *p = samples[i];
    if (infos[i].valid_data && memcmp(&p->key, self, sizeof *self) != 0)
      peers++;
  }
  if (n > 0)
    dds_return_loan(reader, samples, n);
  return peers;
}

/* the interface of the default route (/proc/net/route), where none is named: a node's own
 * network on Kubernetes, whose interface's name k8sdds does not know */
static const char *default_interface(void)
{
  static char name[64];
  char line[256], dest[16];
  FILE *f = fopen("/proc/net/route", "r");
  if (f == NULL)
    return "eth0";
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "%63s %15s", name, dest) == 2 && strcmp(dest, "00000000") == 0) {
      fclose(f);
      return name;
    }
  }
  fclose(f);
  return "eth0";
}

static double number(const char *flag, const char *text)
{
  char *end;
  double v = strtod(text, &end);
  if (*text == '\0' || *end != '\0' || v < 0) {
    fprintf(stderr, "k8sdds-discovery: %s %s: not a number of 0 or more\n", flag, text);
    exit(3);
  }
  return v;
}

static void pause_for(double seconds)
{
  dds_sleepfor(DDS_SECS(0) + (dds_duration_t)(seconds * 1e9));
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "probe") == 0)  /* multicast probed (probe.c) */
    return probe_main(argc - 1, argv + 1);
  int peers = -1;
  double wait = 30, settle = 2, steady = 10, at = 0;
  const char *iface = "";
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) {
      fprintf(stderr, "k8sdds-discovery: %s needs a value\n", argv[i]);
      return 3;
    }
    if (strcmp(argv[i], "-peers") == 0)
      peers = (int)number(argv[i], argv[i + 1]);
    else if (strcmp(argv[i], "-wait") == 0)
      wait = number(argv[i], argv[i + 1]);
    else if (strcmp(argv[i], "-settle") == 0)
      settle = number(argv[i], argv[i + 1]);
    else if (strcmp(argv[i], "-steady") == 0)
      steady = number(argv[i], argv[i + 1]);
    else if (strcmp(argv[i], "-iface") == 0)
      iface = argv[i + 1];
    else if (strcmp(argv[i], "-at") == 0)
      at = number(argv[i], argv[i + 1]);
    else {
      fprintf(stderr, "k8sdds-discovery: unknown option %s (-peers, -wait, -settle, -steady, "
              "-iface, -at)\n", argv[i]);
      return 3;
    }
    i++;
  }
  if (peers < 1 || peers >= MAX_PARTICIPANTS) {
    fprintf(stderr, "k8sdds-discovery: -peers N is required, 1 to %d\n", MAX_PARTICIPANTS - 1);
    return 3;
  }
  if (iface[0] == '\0')
    iface = default_interface();
  printf("k8sdds-discovery 1 cyclonedds %s\n", DDS_VERSION);
  fflush(stdout);
  double late = start_at(at);
  t0 = now();
  printf("start iface %s late %.6f epoch %.6f\n", iface, late, wall());
  fflush(stdout);
  struct counters at_start = read_counters(iface);

  dds_entity_t pp = dds_create_participant(DDS_DOMAIN_DEFAULT, NULL, NULL);
  if (pp < 0)
    fail("creating the participant", pp);
  dds_guid_t self;
  dds_return_t rc = dds_get_guid(pp, &self);
  if (rc < 0)
    fail("reading the participant's GUID", rc);
  dds_entity_t topic = dds_create_topic(pp, &k8sdds_Beat_desc, "k8sdds_discovery", NULL, NULL);
  if (topic < 0)
    fail("creating the topic", topic);
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
  dds_qset_ignorelocal(qos, DDS_IGNORELOCAL_PARTICIPANT);
  dds_entity_t wr = dds_create_writer(pp, topic, qos, NULL);
  if (wr < 0)
    fail("creating the writer", wr);
  dds_entity_t rd = dds_create_reader(pp, topic, qos, NULL);
  if (rd < 0)
    fail("creating the reader", rd);
  dds_delete_qos(qos);
  dds_entity_t participants = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPARTICIPANT, NULL,
                                                NULL);
  if (participants < 0)
    fail("reading DCPSParticipant", participants);

  dds_entity_t ws = dds_create_waitset(pp);
  if ((rc = dds_set_status_mask(wr, DDS_PUBLICATION_MATCHED_STATUS)) < 0 ||
      (rc = dds_set_status_mask(rd, DDS_SUBSCRIPTION_MATCHED_STATUS)) < 0 ||
      (rc = dds_set_status_mask(participants, DDS_DATA_AVAILABLE_STATUS)) < 0)
    fail("setting the status masks", rc);
  if ((rc = dds_waitset_attach(ws, wr, wr)) < 0 || (rc = dds_waitset_attach(ws, rd, rd)) < 0 ||
      (rc = dds_waitset_attach(ws, participants, participants)) < 0)
    fail("attaching to the wait set", rc);

  int seen = -1, readers = -1, writers = -1;
  double matched_at = -1;
  while (matched_at < 0) {
    dds_publication_matched_status_t pm;
    dds_subscription_matched_status_t sm;
    if ((rc = dds_get_publication_matched_status(wr, &pm)) < 0 ||
        (rc = dds_get_subscription_matched_status(rd, &sm)) < 0)
      fail("reading the matched status", rc);
    double t = since_start();
    int p = peer_participants(participants, &self);
    if (p != seen) {
      seen = p;
      printf("participants %.6f %d/%d\n", t, seen, peers);
    }
    if ((int)pm.current_count != readers || (int)sm.current_count != writers) {
      readers = (int)pm.current_count;
      writers = (int)sm.current_count;
      printf("matched %.6f %d/%d %d/%d\n", t, readers, peers, writers, peers);
    }
    fflush(stdout);
    if (readers >= peers && writers >= peers) {
      matched_at = t;
      break;
    }
    if (t >= wait) {
      printf("timeout %.6f %d/%d %d/%d\n", t, readers, peers, writers, peers);
      fflush(stdout);
      dds_delete(pp);
      return 1;
    }
    dds_waitset_wait(ws, NULL, 0, TICK);
  }
  struct counters at_match = read_counters(iface);
  printf("discovered %.6f\n", matched_at);
  print_traffic("discovery", matched_at, at_start, at_match);
  k8sdds_Beat beat = {.id = 0, .sent_ns = (int64_t)(since_start() * 1e9)};
  if ((rc = dds_write(wr, &beat)) < 0)
    fail("writing", rc);
  pause_for(settle);
  struct counters before = read_counters(iface);
  double from = since_start();
  pause_for(steady);
  struct counters after = read_counters(iface);
  print_traffic("steady", since_start() - from, before, after);
  pause_for(settle);
  dds_delete(pp);
  return 0;
}
