// The forward-proxy gateway's flags.
import type { GatewaySettings } from '../../handlers/settings.js';
import { address, millis, positiveInt, seconds, statusCodes, type FlagReader } from './values.js';

export function gatewaySettings(get: FlagReader): GatewaySettings {
  return {
    ...address('gateway-address', get('gateway-address')!),
    maxAttempts: positiveInt('gateway-max-attempts', get('gateway-max-attempts')!),
    connectTimeoutMs: millis('gateway-connect-timeout', get('gateway-connect-timeout')!, 10),
    responseTimeoutMs: millis('gateway-response-timeout', get('gateway-response-timeout')!, 10),
    // A day at most: longer is no idle bound a tunnel needs.
    tunnelIdleSeconds: positiveInt(
      'gateway-tunnel-idle-timeout',
      get('gateway-tunnel-idle-timeout')!,
      1,
      86_400,
    ),
    ttlSeconds: seconds('gateway-lease-ttl', get('gateway-lease-ttl')!, 3),
    idleSeconds: seconds('gateway-idle-timeout', get('gateway-idle-timeout')!, 0),
    bannedCodes: statusCodes('gateway-ban-codes', get('gateway-ban-codes')!),
    rateLimitedCodes: statusCodes('gateway-rate-limit-codes', get('gateway-rate-limit-codes')!),
    drainSeconds: seconds('gateway-drain-timeout', get('gateway-drain-timeout')!, 0),
  };
}
