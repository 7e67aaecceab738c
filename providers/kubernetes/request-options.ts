import type { ConfigurationOptions, RequestContext, ResponseContext } from '@kubernetes/client-node';

/**
 * Per-call options that put `signal` on the request, so an abort cancels the HTTP request
 * itself. The generated client has no signal parameter, but its request context carries one
 * to fetch; a middleware sets it. (The object-parameter API declares Observable middleware
 * but wraps what it is given as Promise middleware, which is what this is.)
 */
export function withRequestSignal(signal: AbortSignal | undefined): ConfigurationOptions | undefined {
  if (!signal) return undefined;
  const middleware = {
    pre: async (context: RequestContext) => {
      context.setSignal(signal);
      return context;
    },
    post: async (context: ResponseContext) => context,
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' } as unknown as ConfigurationOptions;
}
