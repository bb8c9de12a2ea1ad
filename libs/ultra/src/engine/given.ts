// The `given` conductor: a workflow whose completion is handed in with it (`options.completion`),
// written by someone outside fugu (an RL engine's policy, scored by POST /v1/rewards). Nothing
// writes: the executor parses that text exactly as it parses any writer's completion, schedules it
// and runs its steps, so its reward is the one `fugu ultra eval` gives the same completion on the
// same item and seed. A leaf: it imports nothing.

/** The conductor spec of a workflow whose completion is in its options (`completion`). */
export const GIVEN_CONDUCTOR = 'given';

/** Whether a workflow row's conductor is the given-completion one. */
export const isGivenConductor = (conductor: string): boolean => conductor === GIVEN_CONDUCTOR;
