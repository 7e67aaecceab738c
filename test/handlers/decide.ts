import { managedStep, type Inputs, type SlotAsk, type Step } from '../../handlers/proxy-state-machine.js';

/** A budget that grants every slot: for the tables of paths that are not about pacing. */
export const GRANTED: SlotAsk = () => ({ granted: true, cap: 1, failed: [] });

/** Inputs as the tables write them: the budget is GRANTED unless a case gives its own. */
export type CaseInputs = Omit<Inputs, 'slot'> & Partial<Pick<Inputs, 'slot'>>;

/** managedStep over a table's inputs. */
export function decide(inp: CaseInputs): Step {
  return managedStep({ slot: GRANTED, ...inp });
}
