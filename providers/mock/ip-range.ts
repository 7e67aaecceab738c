import { isIPv4 } from 'node:net';

function toInt(ip: string): number {
  return ip.split('.').reduce((acc, octet) => acc * 256 + Number(octet), 0);
}

function toIp(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

/** Parses an IPv4 CIDR; returns a reason instead of throwing so config errors can name the key. */
export function parseCidr(cidr: string): { first: number; size: number } | string {
  const [ip, bits, extra] = cidr.split('/');
  const prefix = Number(bits);
  if (extra !== undefined || !isIPv4(ip ?? '') || !/^\d+$/.test(bits ?? '') || prefix < 8 || prefix > 30) {
    return `"${cidr}" must be an IPv4 CIDR with a prefix length from 8 to 30, e.g. 10.99.0.0/16`;
  }
  const size = 2 ** (32 - prefix);
  const network = toInt(ip) - (toInt(ip) % size);
  return { first: network, size };
}

/** Hands out fake instance IPs from a range, skipping the network and broadcast addresses. */
export class IpRange {
  private readonly first: number;
  private readonly size: number;
  private nextOffset = 1;

  constructor(cidr: string) {
    const parsed = parseCidr(cidr);
    if (typeof parsed === 'string') throw new Error(`mock ipRange: ${parsed}`);
    ({ first: this.first, size: this.size } = parsed);
  }

  next(): string {
    const ip = toIp(this.first + this.nextOffset);
    // Wraps around: the mock never holds more instances than a /30's worth at once in practice.
    this.nextOffset = this.nextOffset + 1 >= this.size - 1 ? 1 : this.nextOffset + 1;
    return ip;
  }
}
