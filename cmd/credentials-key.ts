import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { CREDENTIALS_KEY_FIELD, CREDENTIALS_KEY_SECRET } from '../crds/proxy-credentials.js';
import { CREDENTIALS_KEY_BYTES } from '../handlers/credentials-digest.js';

export class CredentialsKeyError extends Error {}

/** What start-up needs of the API to have the key: read the Secret by name, create it. */
export interface KeySecretApi {
  /** The key's base64 field, or undefined when the Secret does not exist. */
  read(): Promise<string | undefined>;
  /** Creates the Secret; false when it exists already (another replica made it first). */
  create(encoded: string): Promise<boolean>;
}

/**
 * The key the controller's credentials digests are keyed with (handlers/credentials-digest.ts):
 * the Secret's, or one drawn now and stored in a new immutable Secret, read back if another
 * replica created it first, so every replica and every restart keys alike. A Secret that holds
 * no usable key stops start-up naming it: a new key would change every Proxy's spec hash.
 */
export async function resolveCredentialsKey(
  namespace: string,
  api: KeySecretApi,
  random: (bytes: number) => Buffer = randomBytes,
): Promise<Buffer> {
  const where = `Secret ${namespace}/${CREDENTIALS_KEY_SECRET}`;
  let encoded: string | undefined;
  try {
    encoded = await api.read();
    if (encoded === undefined) {
      const drawn = random(CREDENTIALS_KEY_BYTES).toString('base64');
      encoded = (await api.create(drawn)) ? drawn : await api.read();
    }
  } catch (err) {
    throw new CredentialsKeyError(
      `cannot read or create the credentials key ${where} (${(err as Error).message}); grant get on it and create on secrets in ${namespace} (the chart's Role does)`,
    );
  }
  const key = encoded === undefined ? undefined : Buffer.from(encoded, 'base64');
  if (key === undefined || key.length < CREDENTIALS_KEY_BYTES)
    throw new CredentialsKeyError(
      `${where} has no key "${CREDENTIALS_KEY_FIELD}" of at least ${CREDENTIALS_KEY_BYTES} bytes; restore it from a backup (a new key makes every Proxy's spec hash look changed, see docs/security.md)`,
    );
  return key;
}

/** `resolve` once it has succeeded; after a failure, asked again at the next call. */
export function onceResolved<T>(resolve: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= resolve().catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
    return pending;
  };
}

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return e?.code ?? e?.statusCode ?? e?.response?.statusCode;
}

/** The key Secret through the API, in `namespace` (the operator's own). */
export function keySecretApi(kubeConfig: KubeConfig, namespace: string): KeySecretApi {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return {
    async read() {
      try {
        const secret = await core.readNamespacedSecret({ namespace, name: CREDENTIALS_KEY_SECRET });
        return secret.data?.[CREDENTIALS_KEY_FIELD] ?? '';
      } catch (err) {
        if (statusCode(err) === 404) return undefined;
        throw err;
      }
    },
    async create(encoded) {
      try {
        await core.createNamespacedSecret({
          namespace,
          body: {
            metadata: {
              name: CREDENTIALS_KEY_SECRET,
              labels: { 'app.kubernetes.io/name': 'proxy-operator' },
            },
            type: 'Opaque',
            // Never edited: a different key is a different Secret, made only by deleting this one.
            immutable: true,
            data: { [CREDENTIALS_KEY_FIELD]: encoded },
          },
        });
        return true;
      } catch (err) {
        if (statusCode(err) === 409) return false;
        throw err;
      }
    },
  };
}
