import { ApiObject, Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import { API_VERSION, CLOUD_INIT_SECRET_LABEL, KIND, type ProxySpec } from '../crds/proxy-types.js';
import { OPERATOR_NAMESPACE, PROVIDERS_CONFIG_KEY, PROVIDERS_CONFIGMAP_NAME } from './names.js';
import { GCP_SAMPLE_PROVIDERS, providersYaml } from './providers-config.js';

/** A Proxy as a user writes it: the API server fills in the defaulted fields. */
export type ProxySampleSpec = Omit<ProxySpec, 'healthCheck' | 'maxLeases' | 'port'> &
  Partial<Pick<ProxySpec, 'healthCheck' | 'maxLeases' | 'port'>>;

/** The cloud-init Secret of the gcp sample, and the key holding the user-data. */
export const GCP_CLOUD_INIT_SECRET = 'proxy-gcp-cloud-init';
export const GCP_CLOUD_INIT_KEY = 'user-data';
export const GCP_SAMPLE_PROVIDERS_CONFIGMAP = `${PROVIDERS_CONFIGMAP_NAME}-gcp-sample`;

/**
 * Installs Squid on Debian and lets only the listed sources use it. 203.0.113.0/24 is a
 * documentation range: replace it with your crawlers' and the operator's egress ranges, or
 * the health probe (sent from the operator Pod) is denied and the proxy stays Unhealthy.
 * An open proxy on a public IP is abused within hours, hence no "allow all".
 */
export const SQUID_CLOUD_INIT = `#cloud-config
package_update: true
packages:
  - squid
write_files:
  - path: /etc/squid/conf.d/proxy-operator.conf
    content: |
      acl crawlers src 203.0.113.0/24
      http_access allow crawlers
runcmd:
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
