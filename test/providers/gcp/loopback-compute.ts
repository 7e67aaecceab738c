import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { OAuth2Client } from 'google-auth-library';
import { GoogleComputeApi } from '../../../providers/gcp/google-compute-api.js';

/**
 * The real @google-cloud/compute adapter, talking REST to a loopback port with a fixed
 * token: the library's own request encoding, error parsing and cancellation, no cloud.
 */
export function loopbackComputeApi(port: number, timeoutMs = 30_000): GoogleComputeApi {
  const authClient = new OAuth2Client();
  authClient.setCredentials({ access_token: 'loopback-token' });
  const options = { apiEndpoint: '127.0.0.1', port, protocol: 'http', authClient, fallback: true } as const;
  return new GoogleComputeApi(timeoutMs, new InstancesClient(options), new ZoneOperationsClient(options));
}
