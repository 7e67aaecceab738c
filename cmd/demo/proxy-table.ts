import { CustomObjectsApi, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../crds/proxy-types.js';

/** The meta.k8s.io Table the API server renders from the CRD's additionalPrinterColumns. */
interface Table {
  columnDefinitions: Array<{ name: string; type: string; format?: string; priority?: number }>;
  rows: Array<{ cells: unknown[] }>;
}

/** `kubectl get px` as the API server renders it for kubectl: the CRD's own columns, in its order. */
export interface ProxyTable {
  header: string[];
  /** Cells as kubectl prints them (a date column as an age), by the row's first cell (NAME). */
  rows: Map<string, string[]>;
}

/** kubectl's short age: 42s, 3m5s, 12m, 5h, 3d. */
export function shortAge(since: string, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h}h` : `${Math.floor(h / 24)}d`;
}

/** Reads the Proxies of a namespace as a Table (Accept: as=Table), the request kubectl makes. */
export async function proxyTable(kc: KubeConfig, namespace: string, wide = false): Promise<ProxyTable> {
  const table = (await kc
    .makeApiClient(CustomObjectsApi)
    .listNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace, plural: PLURAL },
      setHeaderOptions('Accept', 'application/json;as=Table;v=v1;g=meta.k8s.io'),
    )) as Table;
  const columns = table.columnDefinitions;
  // kubectl hides priority > 0 columns unless `-o wide`.
  const shown = columns.flatMap((c, i) => (c.priority && !wide ? [] : [i]));
  const cell = (value: unknown, i: number): string => {
    if (value === null || value === undefined) return '';
    // The API server already renders a CRD's date column as an age ("5s"); a timestamp is
    // turned into one the way kubectl would.
    if (columns[i].type === 'date' && typeof value === 'string' && !Number.isNaN(Date.parse(value)))
      return shortAge(value);
    return String(value);
  };
  return {
    header: shown.map((i) => columns[i].name.toUpperCase()),
    rows: new Map(table.rows.map((r) => [String(r.cells[0]), shown.map((i) => cell(r.cells[i], i))])),
  };
}

/** One line of kubectl's table output: columns padded to `widths` plus kubectl's three spaces. */
export function tableLine(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(Math.max(widths[i] ?? 0, c.length) + 3)))
    .join('');
}
