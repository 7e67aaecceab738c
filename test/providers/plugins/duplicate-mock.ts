import 'reflect-metadata';
import { provider, type Instance, type Provider } from 'proxy-operator/plugin';

// A plugin claiming a type the operator already has.
@provider({ type: 'mock', config: () => ({}) })
export class AnotherMock implements Provider {
  create = async () => 'x';
  get = async (): Promise<Instance> => {
    throw new Error('unused');
  };
  delete = async () => undefined;
  listByTag = async () => [];
}
