// SPDX-License-Identifier: Apache-2.0
// k8sdds' emulation of Cilium's eBPF datapath between a pod and the wire (no bridge, no
// netfilter on a pod's path). Three tc programs, compiled per node with its configuration
// (node_config.h, written by k8sdds/testbed/ebpf.py, as Cilium's agent compiles its
// programs per node and endpoint):
//   from-container  on each pod's host-side veth, ingress (Cilium's cil_from_container):
//                   a pod of this node gets the frame on its veth (bpf_redirect); a pod of
//                   another node through the tunnel device with the remote node as the
//                   tunnel key (VXLAN) or to the uplink after a FIB lookup
//                   (bpf_redirect_neigh: native routing); anything else goes up the stack.
//   from-netdev     on the uplink, ingress (cil_from_netdev): a packet for a pod of this
//                   node straight into the pod's namespace (bpf_redirect_peer).
//   from-overlay    on the tunnel device, ingress (cil_from_overlay): the same after VXLAN's
//                   decapsulation.
// `k8sdds_hits` counts the packets each program redirected (the tests read it).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "node_config.h"

// TUNNEL (1: VXLAN), VNI, NETDEV_IFINDEX, TUNNEL_IFINDEX;
// ENDPOINTS(X): X(address, host veth ifindex, pod MAC, host veth MAC) for each local pod;
// REMOTES(X): X(pod network, its mask, node address) for each other node (host order)

enum { FROM_CONTAINER, FROM_NETDEV, FROM_OVERLAY, HITS };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HITS);
	__type(key, __u32);
	__type(value, __u64);
} k8sdds_hits SEC(".maps");

struct endpoint {
	__u32 ifindex;
	__u8 mac[ETH_ALEN];
	__u8 host_mac[ETH_ALEN];
};

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&k8sdds_hits, &which);

	if (n)
		__sync_fetch_and_add(n, 1);
}

// the local pod at `daddr` (network order), if any
static __always_inline int local_endpoint(__u32 daddr, struct endpoint *ep)
{
#define MATCH(address, index, m0, m1, m2, m3, m4, m5, h0, h1, h2, h3, h4, h5)            \
	if (daddr == bpf_htonl(address)) {                                              \
		__u8 mac[ETH_ALEN] = {m0, m1, m2, m3, m4, m5};                          \
		__u8 host[ETH_ALEN] = {h0, h1, h2, h3, h4, h5};                         \
		ep->ifindex = index;                                                    \
		__builtin_memcpy(ep->mac, mac, ETH_ALEN);                               \
		__builtin_memcpy(ep->host_mac, host, ETH_ALEN);                         \
		return 1;                                                               \
	}
	ENDPOINTS(MATCH)
#undef MATCH
	return 0;
}

// the node whose pods' range holds `daddr` (network order), if another node's
static __always_inline int remote_node(__u32 daddr, __u32 *node)
{
	__u32 d = bpf_ntohl(daddr);

#define MATCH(network, mask, address)                                                     \
	if ((d & (mask)) == (network)) {                                                \
		*node = address;                                                        \
		return 1;                                                               \
	}
	REMOTES(MATCH)
#undef MATCH
	return 0;
}

// the IPv4 header of an Ethernet frame, or NULL
static __always_inline struct iphdr *ipv4(struct __sk_buff *skb, struct ethhdr **eth)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct iphdr *ip;

	*eth = data;
	if ((void *)(*eth + 1) > end || (*eth)->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	ip = (void *)(*eth + 1);
	if ((void *)(ip + 1) > end)
		return NULL;
	return ip;
}

// into the local pod's namespace: its MAC as the destination, from its host veth
static __always_inline int deliver(struct ethhdr *eth, struct endpoint *ep, int peer)
{
	__builtin_memcpy(eth->h_dest, ep->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, ep->host_mac, ETH_ALEN);
	return peer ? bpf_redirect_peer(ep->ifindex, 0) : bpf_redirect(ep->ifindex, 0);
}

SEC("from-container")
int from_container(struct __sk_buff *skb)
{
	struct ethhdr *eth;
	struct iphdr *ip = ipv4(skb, &eth);
	struct endpoint ep;
	__u32 daddr, node;

	if (!ip)
		return TC_ACT_OK;
	daddr = ip->daddr;
	if (local_endpoint(daddr, &ep)) {
		count(FROM_CONTAINER);
		return deliver(eth, &ep, 0);
	}
	if (!remote_node(daddr, &node))
		return TC_ACT_OK; // the node, the world: up the node's stack
	count(FROM_CONTAINER);
#if TUNNEL
	{
		struct bpf_tunnel_key key = {};

		key.remote_ipv4 = node;
		key.tunnel_id = VNI;
		key.tunnel_ttl = 64;
		if (bpf_skb_set_tunnel_key(skb, &key, sizeof(key), BPF_F_ZERO_CSUM_TX) < 0)
			return TC_ACT_SHOT;
		return bpf_redirect(TUNNEL_IFINDEX, 0);
	}
#else
	return bpf_redirect_neigh(NETDEV_IFINDEX, NULL, 0, 0);
#endif
}

static __always_inline int to_local_pod(struct __sk_buff *skb, __u32 which)
{
	struct ethhdr *eth;
	struct iphdr *ip = ipv4(skb, &eth);
	struct endpoint ep;

	if (!ip || !local_endpoint(ip->daddr, &ep))
		return TC_ACT_OK;
	count(which);
	return deliver(eth, &ep, 1);
}

SEC("from-netdev")
int from_netdev(struct __sk_buff *skb)
{
	return to_local_pod(skb, FROM_NETDEV);
}

SEC("from-overlay")
int from_overlay(struct __sk_buff *skb)
{
	return to_local_pod(skb, FROM_OVERLAY);
}

char LICENSE[] SEC("license") = "Apache-2.0"; // no GPL-only helper is called
