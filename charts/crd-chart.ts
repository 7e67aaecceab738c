import { ApiObject, Chart } from 'cdk8s';
import type { Construct } from 'constructs';
import { proxyCrd } from '../crds/proxy-crd.js';

/** The CustomResourceDefinitions, in their own chart (dist/crds.yaml) so they can be applied first. */
export class CrdChart extends Chart {
  constructor(scope: Construct, id: string) {
    super(scope, id);
    new ApiObject(this, 'proxy', proxyCrd);
  }
}
