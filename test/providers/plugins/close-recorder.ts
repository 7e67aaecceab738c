import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import {
  inject,
  NotFoundError,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
  type ConfigObject,
  type Instance,
  type Provider,
} from 'proxy-operator/plugin';

interface RecorderSettings {
  /** Where close() writes "closed <name>": proof, from outside the process, that it ran. */
  file: string;
}

/** A test plugin whose close() leaves a trace on disk. */
@provider({
  type: 'close-recorder',
  config: (block: ConfigObject) => ({ file: block.requiredString('file') }),
})
export class CloseRecorder implements Provider {
  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: RecorderSettings,
  ) {}
  create = async () => 'never';
  get = async (id: string): Promise<Instance> => {
    throw new NotFoundError('nothing here', { provider: this.name, operation: 'get', providerID: id });
  };
  delete = async () => undefined;
  listByTag = async () => [];
  async close(): Promise<void> {
    appendFileSync(this.settings.file, `closed ${this.name}\n`);
  }
}
