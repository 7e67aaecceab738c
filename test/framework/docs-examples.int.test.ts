// Keeps docs/framework.md honest: the example operator it quotes does what the page says,
// against a real API server (docs-quotes.unit.test.ts checks the quotes).
import 'reflect-metadata';
import { Registry } from 'prom-client';
import type { Operator } from '../../framework/index.js';
import { isStatus, KubeClient, MERGE_PATCH } from '../../framework/utils/kube-client.js';
import {
  GREETING_CRD,
  GROUP,
  SALUTATION_LABEL,
  type Greeting,
} from '../../examples/handlers/greeting-kind.js';
import { greetingOperator } from '../../examples/handlers/greeting-operator.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { eventually, testLogger } from './widget-world.js';

describe('the example operator, against the control plane', () => {
  const kc = testKubeConfig();
  const client = new KubeClient(kc);
  const namespace = uniqueName('fw-docs');
  const greetings = `/apis/${GROUP}/v1/namespaces/${namespace}/greetings`;
  const configmaps = `/api/v1/namespaces/${namespace}/configmaps`;
  let operator: Operator;

  const greeting = (name: string) => client.request<Greeting>('GET', `${greetings}/${name}`);
  const events = async (name: string) =>
    (
      await client.request<{ items: Array<{ type: string; reason: string; message: string }> }>(
        'GET',
        `/api/v1/namespaces/${namespace}/events`,
        { query: { fieldSelector: `involvedObject.name=${name}` } },
      )
    ).items;

  beforeAll(async () => {
    try {
      await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        body: GREETING_CRD,
      });
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
    }
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: namespace } } });
    await eventually(() => client.request('GET', greetings));
    operator = greetingOperator({
      kubeConfig: kc,
      logger: testLogger(),
      registry: new Registry(),
      settings: { checkSeconds: 1 },
      namespace,
    });
    await operator.start();
  });
  afterAll(() => operator?.stop());

  it('greets, follows its salutation ConfigMap, refuses a nameless greeting and says goodbye', async () => {
    await client.request('POST', configmaps, {
      body: {
        metadata: { name: 'words', labels: { [SALUTATION_LABEL]: 'true' } },
        data: { salutation: 'Bonjour' },
      },
    });
    const post = (name: string, spec: Greeting['spec']) =>
      client.request('POST', greetings, {
        body: { apiVersion: `${GROUP}/v1`, kind: 'Greeting', metadata: { name }, spec },
      });
    await post('ada', { name: 'Ada', salutationFrom: 'words' });
    await post('nobody', {});
    await eventually(async () => expect((await greeting('ada')).status?.message).toBe('Bonjour, Ada!'));

    await client.request('PATCH', `${configmaps}/words`, {
      body: { data: { salutation: 'Salut' } },
      contentType: MERGE_PATCH,
    });
    await eventually(async () => expect((await greeting('ada')).status?.message).toBe('Salut, Ada!'));

    await eventually(async () =>
      expect(await events('nobody')).toContainEqual(
        expect.objectContaining({
          type: 'Warning',
          reason: 'HandlerFailed',
          message: expect.stringContaining('spec.name'),
        }),
      ),
    );

    await client.request('DELETE', `${greetings}/ada`);
    await eventually(async () => {
      await expect(greeting('ada')).rejects.toThrow();
      expect(await events('ada')).toContainEqual(
        expect.objectContaining({ reason: 'Farewell', message: 'Goodbye, Ada' }),
      );
    });
  });
});
