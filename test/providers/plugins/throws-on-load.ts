// A plugin whose module fails while loading.
throw new Error('plugin exploded while loading');
