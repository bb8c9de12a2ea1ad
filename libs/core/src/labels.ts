// Soft labels for router SFT: p_i(j) = softmax(rbar_ij / tau) over the workers j.

export function softLabels(meanRewards: readonly number[], tau: number): number[] {
  if (!(tau > 0)) throw new RangeError(`tau must be > 0, got ${tau}`);
  const z = meanRewards.map((r) => r / tau);
  const max = Math.max(...z);
  const e = z.map((v) => Math.exp(v - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}
