/* k8sdds-discovery probe: does multicast cross this network? The same probe as
 * k8sdds/testbed/multicast.py (its group, port, TTL, count and nonce), for a place that has
 * no Python: a pod of the engine image. A receiver joins the group DDS discovery uses and
 * waits for a datagram carrying the probe's nonce; a sender sends it.
 *
 * Usage: k8sdds-discovery probe recv ADDRESS NONCE SECONDS
 *        k8sdds-discovery probe send ADDRESS NONCE
 *   ADDRESS: the interface's IPv4 address (0.0.0.0: the one the group's route takes);
 *   NONCE: what the datagrams carry; SECONDS: how long a receiver waits at most.
 *
 * Output: `ready` once the receiver has joined, then `arrived from SOURCE` or `none`; the
 * sender says `sent COUNT`. Exit status 0, or 2 when a socket call fails (said on stderr).
 */
#define _DEFAULT_SOURCE /* struct ip_mreq */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define GROUP "239.255.0.1" /* Cyclone DDS's default SPDP multicast address */
#define PORT 7400           /* SPDP's multicast port for DDS domain 0 */
#define TTL 32              /* Cyclone DDS's MulticastTimeToLive */
#define COUNT 3             /* datagrams sent, 50 ms apart */

static int failed(const char *what)
{
  fprintf(stderr, "k8sdds-discovery probe: %s: %s\n", what, strerror(errno));
  return 2;
}

static double monotonic(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int address(const char *text, struct in_addr *out)
{
  if (inet_pton(AF_INET, text, out) != 1) {
    fprintf(stderr, "k8sdds-discovery probe: %s is not an IPv4 address\n", text);
    return 0;
  }
  return 1;
}

static int receive(const char *iface, const char *nonce, double seconds)
{
  struct ip_mreq join;
  if (!address(iface, &join.imr_interface) || !address(GROUP, &join.imr_multiaddr))
    return 3;
  int sock = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
  if (sock < 0)
    return failed("socket");
  int one = 1;
  struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(PORT),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) /* beside a DDS */
    return failed("SO_REUSEADDR");
  if (bind(sock, (struct sockaddr *)&any, sizeof any) < 0)
    return failed("bind");
  if (setsockopt(sock, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) < 0)
    return failed("IP_ADD_MEMBERSHIP");
  printf("ready\n");
  fflush(stdout);
  double deadline = monotonic() + seconds;
  size_t want = strlen(nonce);
  char data[2048];
  double left;
  while ((left = deadline - monotonic()) > 0) {
    struct pollfd p = {.fd = sock, .events = POLLIN};
    int n = poll(&p, 1, (int)(left * 1000) + 1);
    if (n < 0 && errno != EINTR)
      return failed("poll");
    if (n <= 0)
      continue;
    struct sockaddr_in from;
    socklen_t size = sizeof from;
    ssize_t got = recvfrom(sock, data, sizeof data, 0, (struct sockaddr *)&from, &size);
    if (got < 0)
      return failed("recvfrom");
    if ((size_t)got == want && memcmp(data, nonce, want) == 0) {
      char source[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &from.sin_addr, source, sizeof source);
      printf("arrived from %s\n", source);
      fflush(stdout);
      return 0;
    }
  }
  printf("none\n");
  fflush(stdout);
  return 0;
}

static int send_probe(const char *iface, const char *nonce)
{
  struct in_addr out;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT)};
  if (!address(iface, &out) || !address(GROUP, &to.sin_addr))
    return 3;
  int sock = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
  if (sock < 0)
    return failed("socket");
  unsigned char ttl = TTL;
  if (setsockopt(sock, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) < 0)
    return failed("IP_MULTICAST_TTL");
  if (out.s_addr != htonl(INADDR_ANY) &&
      setsockopt(sock, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof out) < 0)
    return failed("IP_MULTICAST_IF");
  for (int i = 0; i < COUNT; i++) {
    if (sendto(sock, nonce, strlen(nonce), 0, (struct sockaddr *)&to, sizeof to) < 0)
      return failed("sendto");
    if (i + 1 < COUNT) {
      struct timespec gap = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
      nanosleep(&gap, NULL);
    }
  }
  printf("sent %d\n", COUNT);
  return 0;
}

int probe_main(int argc, char **argv)
{
  if (argc == 5 && strcmp(argv[1], "recv") == 0) {
    char *end;
    double seconds = strtod(argv[4], &end);
    if (*end == '\0' && seconds > 0)
      return receive(argv[2], argv[3], seconds);
  } else if (argc == 4 && strcmp(argv[1], "send") == 0) {
    return send_probe(argv[2], argv[3]);
  }
  fprintf(stderr, "usage: k8sdds-discovery probe recv ADDRESS NONCE SECONDS\n"
                  "       k8sdds-discovery probe send ADDRESS NONCE\n");
  return 3;
}
