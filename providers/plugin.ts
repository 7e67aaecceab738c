// The provider plugin API: everything a provider — built-in or out-of-tree — is written
// against. Out-of-tree plugins import it as 'proxy-operator/plugin' (the operator resolves
// that name to this module at start-up); see docs/providers.md.
import 'reflect-metadata';
export {
  provider,
  PROVIDER_KUBECONFIG,
  PROVIDER_LOGGER,
  PROVIDER_METRICS,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  type OwnedProvider,
  type ProviderTypeOptions,
} from './provider-class.js';
export { inject } from 'tsyringe';
export {
  gcLabels,
  ownershipFromLabels,
  LABEL_MANAGED,
  LABEL_NAMESPACE,
  LABEL_OWNER,
  LABEL_REVISION,
  LABEL_UID,
  type CreateRequest,
  type Instance,
  type InstanceState,
  type Provider,
} from './contract.js';
export {
  isNotFound,
  isPermanent,
  isProviderError,
  isQuotaExceeded,
  isTransient,
  NotFoundError,
  ProviderError,
  providerError,
  ProviderPermanentError,
  QuotaExceededError,
  TransientError,
  type ProviderErrorContext,
  type ProviderErrorKind,
  type ProviderOperation,
} from './errors.js';
export { instanceName } from './naming.js';
export { isNetworkError, networkErrorCode, NETWORK_ERROR_CODES } from './network-errors.js';
export { withSignal, isAbortOf } from './abort.js';
export { AbortableProvider } from './abortable-provider.js';
export { ConfigObject, ProvidersConfigError } from './config-reader.js';
