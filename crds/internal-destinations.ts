// Destinations a proxy must never reach on a client's behalf: the cloud metadata services
// (which hand out the node's credentials), the node itself and the private networks a
// cluster's Pods, Services and API server live in. Shared by the kubernetes provider's
// squid.conf, the NetworkPolicy and the cloud-init samples, so they refuse the same ranges.

/** IPv4 ranges refused by default. */
export const INTERNAL_IPV4_RANGES = [
  /** "This network"; 0.0.0.0 reaches the local host on Linux. */
  '0.0.0.0/8',
  /** RFC 1918. */
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  /** Loopback. */
  '127.0.0.0/8',
  /** Link-local: 169.254.169.254 is the metadata endpoint of AWS, GCP and Azure. */
  '169.254.0.0/16',
  /** Shared address space (RFC 6598): carrier NAT, some clouds' metadata (100.100.100.200). */
  '100.64.0.0/10',
] as const;

/** IPv6 ranges refused by default. */
export const INTERNAL_IPV6_RANGES = [
  /** Loopback and the unspecified address. */
  '::1/128',
  '::/128',
  /** IPv4-mapped: ::ffff:10.0.0.1 is 10.0.0.1. */
  '::ffff:0:0/96',
  /** Link-local. */
  'fe80::/10',
  /**
   * Unique local, which holds fd00:ec2::/32 (AWS's IPv6 metadata endpoint fd00:ec2::254); not
   * listed twice, since Squid ignores (and warns about) a range inside another of the same acl.
   */
  'fc00::/7',
] as const;

/** Every range refused by default, IPv4 first. */
export const INTERNAL_DESTINATIONS: readonly string[] = [...INTERNAL_IPV4_RANGES, ...INTERNAL_IPV6_RANGES];
