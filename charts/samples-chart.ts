import { ApiObject, Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import { INTERNAL_DESTINATIONS } from '../crds/internal-destinations.js';
import { CLOUD_INIT_PLACEHOLDERS } from '../crds/proxy-credentials.js';
import { API_VERSION, CLOUD_INIT_SECRET_LABEL, KIND, type ProxySpec } from '../crds/proxy-types.js';
import { OPERATOR_NAMESPACE, PROVIDERS_CONFIG_KEY, PROVIDERS_CONFIGMAP_NAME } from './names.js';
import { GCP_SAMPLE_PROVIDERS, providersYaml } from './providers-config.js';

/** A Proxy as a user writes it: the API server fills in the defaulted fields. */
export type ProxySampleSpec = Omit<ProxySpec, 'healthCheck' | 'maxLeases' | 'port' | 'rotation'> &
  Partial<Pick<ProxySpec, 'healthCheck' | 'maxLeases' | 'port' | 'rotation'>>;

/** The cloud-init Secret of the gcp sample, and the key holding the user-data. */
export const GCP_CLOUD_INIT_SECRET = 'proxy-gcp-cloud-init';
export const GCP_CLOUD_INIT_KEY = 'user-data';
export const GCP_SAMPLE_PROVIDERS_CONFIGMAP = `${PROVIDERS_CONFIGMAP_NAME}-gcp-sample`;

/** Where the sample cloud-init keeps the filled-in credentials until it has hashed them (tmpfs). */
export const SAMPLE_CREDENTIALS_FILE = '/run/proxy-operator/credentials';

/**
 * Installs Squid on Debian (the GCP and AWS samples' images) and closes it: a client must
 * present the proxy's credentials (the operator fills in the named placeholders
 * {{proxy.username}} and {{proxy.password}} before the provider sees the text; only a hash is
 * written on the VM; the placeholders sit alone on lines of a YAML literal block, read by
 * `sed` and piped to openssl, so no quoting can break whatever a hand-set password holds),
 * and no destination inside (link-local with the metadata endpoint,
 * loopback, RFC 1918, unique-local: crds/internal-destinations.ts) is reachable through it.
 * An open proxy on a public IP is abused within hours, hence no "allow all".
 */
export const SQUID_CLOUD_INIT = `#cloud-config
package_update: true
packages:
  - squid
  - openssl
write_files:
  - path: /etc/squid/conf.d/proxy-operator.conf
    content: |
      auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/proxy-operator.passwd
      auth_param basic realm proxy-operator
      acl authenticated proxy_auth REQUIRED
      acl internal dst ${INTERNAL_DESTINATIONS.join(' ')}
      http_access deny !authenticated
      http_access deny internal
      http_access allow authenticated
  - path: ${SAMPLE_CREDENTIALS_FILE}
    permissions: '0600'
    content: |
      # user name, then password, one a line (a literal block: no character needs quoting)
      ${CLOUD_INIT_PLACEHOLDERS.username}
      ${CLOUD_INIT_PLACEHOLDERS.password}
runcmd:
  - u="$(sed -n 2p ${SAMPLE_CREDENTIALS_FILE})" && h="$(sed -n 3p ${SAMPLE_CREDENTIALS_FILE} | openssl passwd -apr1 -stdin)" && printf '%s:%s\\n' "$u" "$h" > /etc/squid/proxy-operator.passwd
  - rm -f ${SAMPLE_CREDENTIALS_FILE}
  - chown root:proxy /etc/squid/proxy-operator.passwd
  - chmod 0640 /etc/squid/proxy-operator.passwd
  - systemctl enable squid
  - systemctl restart squid
`;

/**
 * dist/samples.yaml: one Proxy per way of running one, the Secret the gcp sample reads its
 * cloud-init from, and a providers config with named gcp instances. Proxies and the Secret
 * carry no namespace, so they land in the namespace `kubectl apply -n` names.
 */
export class SamplesChart extends Chart {
  constructor(scope: Construct, id: string) {
    super(scope, id);

    this.proxy('proxy-mock-sample', {
      mode: 'Managed',
      provider: 'mock',
      attributes: { geo: 'local', purpose: 'demo' },
    });

    new kplus.Secret(this, 'gcp-cloud-init', {
      metadata: { name: GCP_CLOUD_INIT_SECRET, labels: { [CLOUD_INIT_SECRET_LABEL]: 'true' } },
      stringData: { [GCP_CLOUD_INIT_KEY]: SQUID_CLOUD_INIT },
    });
    this.proxy('proxy-gcp-sample', {
      mode: 'Managed',
      provider: 'gcp-eu',
      placement: {
        zone: 'europe-west1-b',
        machineType: 'e2-micro',
        image: 'projects/debian-cloud/global/images/family/debian-12',
      },
      cloudInit: { secretRef: { name: GCP_CLOUD_INIT_SECRET, key: GCP_CLOUD_INIT_KEY } },
      port: 3128,
      attributes: { geo: 'eu', provider: 'gcp' },
    });

    this.proxy('proxy-kubernetes-sample', {
      mode: 'Managed',
      provider: 'kubernetes',
      attributes: { geo: 'local' },
      healthCheck: {
        probeURL: 'https://www.gstatic.com/generate_204',
        intervalSeconds: 15,
        timeoutSeconds: 5,
        failureThreshold: 3,
        successThreshold: 1,
        expectedStatusCodes: [204],
      },
    });

    this.proxy('proxy-external-sample', {
      mode: 'External',
      endpoint: { host: 'proxy.example.com', port: 3128 },
      attributes: { geo: 'us', asn: 'AS64496' },
      maxLeases: 10,
    });

    new kplus.ConfigMap(this, 'gcp-providers', {
      metadata: {
        name: GCP_SAMPLE_PROVIDERS_CONFIGMAP,
        namespace: OPERATOR_NAMESPACE,
        annotations: {
          'proxy-operator.crawl.example.com/usage':
            `Copy ${PROVIDERS_CONFIG_KEY} into the ConfigMap ${PROVIDERS_CONFIGMAP_NAME} (set your project) ` +
            'and restart the operator; it reads the file at startup.',
        },
      },
      data: { [PROVIDERS_CONFIG_KEY]: providersYaml(GCP_SAMPLE_PROVIDERS) },
    });
  }

  private proxy(name: string, spec: ProxySampleSpec): void {
    new ApiObject(this, name, { apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec });
  }
}
