import 'reflect-metadata';
import { container, inject, injectable } from 'tsyringe';
import { KubeConfig } from '@kubernetes/client-node';

const GREETING = Symbol('greeting');

@injectable()
class Greeter {
  constructor(@inject(GREETING) readonly greeting: string) {}
}

describe('the module system', () => {
  it('loads the ESM-only client-node under jest', () => {
    expect(typeof new KubeConfig().loadFromOptions).toBe('function');
  });

  it('injects constructor dependencies through tsyringe decorators', () => {
    const child = container.createChildContainer();
    child.register(GREETING, { useValue: 'hello' });
    expect(child.resolve(Greeter).greeting).toBe('hello');
  });
});
