// Exact money. Amounts are bigint picodollars (1e-12 USD): a price of $0.0375 per million
// tokens is 37,500 pico-USD a token, so token costs are exact integers. Postgres stores them
// as numeric(24,12) through the decimal strings below; nothing goes through a float.

export const PICO_PER_USD = 1_000_000_000_000n;
const DECIMALS = 12;

/** Parse a non-negative USD decimal ("0.20", "15", "1e-3" not allowed) into picodollars. */
export function parseUsd(value: string | number): bigint {
  const s = typeof value === 'number' ? numberToPlain(value) : value.trim();
  const m = /^(\d+)(?:\.(\d+))?$/.exec(s);
  if (!m) throw new RangeError(`not a non-negative decimal amount of USD: ${JSON.stringify(value)}`);
  const frac = (m[2] ?? '').padEnd(DECIMALS, '0');
  if (frac.length > DECIMALS && /[1-9]/.test(frac.slice(DECIMALS))) {
    throw new RangeError(`more than ${DECIMALS} decimal places: ${JSON.stringify(value)}`);
  }
  return BigInt(m[1]!) * PICO_PER_USD + BigInt(frac.slice(0, DECIMALS));
}

function numberToPlain(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`not a non-negative amount: ${n}`);
  // toFixed(12) is exact for the decimal prices people write (at most 12 places)
  return n.toFixed(DECIMALS).replace(/\.?0+$/, '') || '0';
}

/** Picodollars to a decimal string with 12 places ("0.000001200000"), as Postgres numeric takes it. */
export function formatUsd(pico: bigint, places = DECIMALS): string {
  const neg = pico < 0n;
  const abs = neg ? -pico : pico;
  const whole = abs / PICO_PER_USD;
  const frac = (abs % PICO_PER_USD).toString().padStart(DECIMALS, '0').slice(0, places);
  return `${neg ? '-' : ''}${whole}${places > 0 ? `.${frac}` : ''}`;
}

/** Cost of a call: tokens times price per million tokens, exact. */
export function tokenCost(tokensIn: number, tokensOut: number, prices: { inputPerMTok: string; outputPerMTok: string }): bigint {
  const inPrice = parseUsd(prices.inputPerMTok);
  const outPrice = parseUsd(prices.outputPerMTok);
  return (BigInt(tokensIn) * inPrice + BigInt(tokensOut) * outPrice) / 1_000_000n;
}
