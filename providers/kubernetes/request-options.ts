import {
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

/**
 * Per-call options that put `signal` on the request, so an abort cancels the HTTP request
 * itself. The generated client has no signal parameter, but its request context carries one
 * to fetch; a middleware (the object-parameter API's Observable kind) sets it.
 */
export function withRequestSignal(
  signal: AbortSignal | undefined,
): ConfigurationOptions<ObservableMiddleware> | undefined {
  if (!signal) return undefined;
  const middleware: ObservableMiddleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (context: ResponseContext) => new Observable(Promise.resolve(context)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}
