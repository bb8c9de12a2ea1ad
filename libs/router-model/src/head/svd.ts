// Singular value decomposition of a dense matrix, A = U diag(S) V^T, in float64.
//
// Golub-Kahan-Reinsch: Householder bidiagonalisation, then implicit-shift QR sweeps on the
// bidiagonal (the algorithm of LINPACK's dsvdc, as in JAMA). O(m n^2); a 512x512 matrix takes
// about a second in Node. Work arrays are column-major (column j at [j*rows, (j+1)*rows)) so
// every O(n^3) inner loop walks contiguous memory; the result is returned row-major.

import { InputError } from '@fugu/core';

export interface Svd {
  /** Rows of A. */
  rows: number;
  /** Columns of A. */
  cols: number;
  /** min(rows, cols): the number of singular triplets kept (thin SVD). */
  rank: number;
  /** [rows, rank] row-major, orthonormal columns. */
  U: Float64Array;
  /** [rank], descending, >= 0. */
  S: Float64Array;
  /** [cols, rank] row-major, orthonormal columns (A = U diag(S) V^T). */
  V: Float64Array;
}

/** Thin SVD of the row-major matrix `a` [rows, cols] (float32 or float64 input). */
export function svd(a: ArrayLike<number>, rows: number, cols: number): Svd {
  if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows < 1 || cols < 1) {
    throw new InputError(`svd: dims must be positive integers, got [${rows}, ${cols}]`, { field: 'dims' });
  }
  if (a.length !== rows * cols) throw new InputError(`svd: [${rows}, ${cols}] needs ${rows * cols} values, got ${a.length}`, { field: 'a' });
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i]!)) throw new InputError(`svd: element ${i} is ${a[i]}`, { field: 'a' });
  }
  // The bidiagonalisation below needs rows >= cols; a wide matrix is decomposed transposed.
  if (rows < cols) {
    const t = new Float64Array(rows * cols);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) t[j * rows + i] = a[i * cols + j]!;
    const r = svd(t, cols, rows);
    return { rows, cols, rank: r.rank, U: r.V, S: r.S, V: r.U };
  }
  const res = golubKahan(a, rows, cols);
  return res;
}

function golubKahan(input: ArrayLike<number>, m: number, n: number): Svd {
  // A, column-major copy.
  const A = new Float64Array(m * n);
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) A[j * m + i] = input[i * n + j]!;
  const nu = Math.min(m, n);
  const s = new Float64Array(Math.min(m + 1, n));
  const U = new Float64Array(m * nu); // column-major [m, nu]
  const V = new Float64Array(n * n); // column-major [n, n]
  const e = new Float64Array(n);
  const work = new Float64Array(m);

  // Reduce A to bidiagonal form: diagonal in s, super-diagonal in e.
  const nct = Math.min(m - 1, n);
  const nrt = Math.max(0, Math.min(n - 2, m));
  for (let k = 0; k < Math.max(nct, nrt); k++) {
    const ck = k * m;
    if (k < nct) {
      // Householder for column k; the k-th diagonal value goes to s[k].
      let nrm = 0;
      for (let i = k; i < m; i++) nrm = Math.hypot(nrm, A[ck + i]!);
      if (nrm !== 0) {
        if (A[ck + k]! < 0) nrm = -nrm;
        for (let i = k; i < m; i++) A[ck + i]! /= nrm;
        A[ck + k]! += 1;
      }
      s[k] = -nrm;
    }
    for (let j = k + 1; j < n; j++) {
      const cj = j * m;
      if (k < nct && s[k] !== 0) {
        let t = 0;
        for (let i = k; i < m; i++) t += A[ck + i]! * A[cj + i]!;
        t = -t / A[ck + k]!;
        for (let i = k; i < m; i++) A[cj + i]! += t * A[ck + i]!;
      }
      e[j] = A[cj + k]!; // row k, for the row transformation
    }
    if (k < nct) for (let i = k; i < m; i++) U[k * m + i] = A[ck + i]!;
    if (k < nrt) {
      // Householder for row k; the k-th super-diagonal value goes to e[k].
      let nrm = 0;
      for (let i = k + 1; i < n; i++) nrm = Math.hypot(nrm, e[i]!);
      if (nrm !== 0) {
        if (e[k + 1]! < 0) nrm = -nrm;
        for (let i = k + 1; i < n; i++) e[i]! /= nrm;
        e[k + 1]! += 1;
      }
      e[k] = -nrm;
      if (k + 1 < m && nrm !== 0) {
        work.fill(0, k + 1, m);
        for (let j = k + 1; j < n; j++) {
          const cj = j * m, ej = e[j]!;
          for (let i = k + 1; i < m; i++) work[i]! += ej * A[cj + i]!;
        }
        for (let j = k + 1; j < n; j++) {
          const cj = j * m, t = -e[j]! / e[k + 1]!;
          for (let i = k + 1; i < m; i++) A[cj + i]! += t * work[i]!;
        }
      }
      for (let i = k + 1; i < n; i++) V[k * n + i] = e[i]!;
    }
  }

  // The final bidiagonal matrix of order p.
  let p = Math.min(n, m + 1);
  if (nct < n) s[nct] = A[nct * m + nct]!;
  if (m < p) s[p - 1] = 0;
  if (nrt + 1 < p) e[nrt] = A[(p - 1) * m + nrt]!;
  e[p - 1] = 0;

  // Generate U.
  for (let j = nct; j < nu; j++) {
    U.fill(0, j * m, (j + 1) * m);
    U[j * m + j] = 1;
  }
  for (let k = nct - 1; k >= 0; k--) {
    const ck = k * m;
    if (s[k] !== 0) {
      for (let j = k + 1; j < nu; j++) {
        const cj = j * m;
        let t = 0;
        for (let i = k; i < m; i++) t += U[ck + i]! * U[cj + i]!;
        t = -t / U[ck + k]!;
        for (let i = k; i < m; i++) U[cj + i]! += t * U[ck + i]!;
      }
      for (let i = k; i < m; i++) U[ck + i] = -U[ck + i]!;
      U[ck + k] = 1 + U[ck + k]!;
      for (let i = 0; i < k; i++) U[ck + i] = 0;
    } else {
      U.fill(0, ck, ck + m);
      U[ck + k] = 1;
    }
  }

  // Generate V.
  for (let k = n - 1; k >= 0; k--) {
    const ck = k * n;
    if (k < nrt && e[k] !== 0) {
      for (let j = k + 1; j < nu; j++) {
        const cj = j * n;
        let t = 0;
        for (let i = k + 1; i < n; i++) t += V[ck + i]! * V[cj + i]!;
        t = -t / V[ck + k + 1]!;
        for (let i = k + 1; i < n; i++) V[cj + i]! += t * V[ck + i]!;
      }
    }
    V.fill(0, ck, ck + n);
    V[ck + k] = 1;
  }

  // Givens rotation of columns j and k of a column-major matrix with `len` rows:
  // col_j <- cs col_j + sn col_k, col_k <- -sn col_j + cs col_k.
  const rotate = (M: Float64Array, len: number, j: number, k: number, cs: number, sn: number): void => {
    const cj = j * len, ck = k * len;
    for (let i = 0; i < len; i++) {
      const a = M[cj + i]!, b = M[ck + i]!;
      M[cj + i] = cs * a + sn * b;
      M[ck + i] = -sn * a + cs * b;
    }
  };

  // Main iteration: deflate, split, or one implicit-shift QR step, until every e is negligible.
  const pp = p - 1;
  const eps = 2 ** -52;
  const tiny = 2 ** -966;
  let iter = 0;
  while (p > 0) {
    if (iter > 75 * n) throw new Error(`svd: no convergence after ${iter} QR steps`);
    // kase 1: s[p-1] negligible; 2: s[k] negligible; 3: e[k-1] negligible, QR step; 4: e[p-2] negligible (converged).
    let k: number;
    for (k = p - 2; k >= 0; k--) {
      if (Math.abs(e[k]!) <= tiny + eps * (Math.abs(s[k]!) + Math.abs(s[k + 1]!))) {
        e[k] = 0;
        break;
      }
    }
    let kase: number;
    if (k === p - 2) kase = 4;
    else {
      let ks: number;
      for (ks = p - 1; ks > k; ks--) {
        const t = (ks !== p ? Math.abs(e[ks]!) : 0) + (ks !== k + 1 ? Math.abs(e[ks - 1]!) : 0);
        if (Math.abs(s[ks]!) <= tiny + eps * t) {
          s[ks] = 0;
          break;
        }
      }
      if (ks === k) kase = 3;
      else if (ks === p - 1) kase = 1;
      else {
        kase = 2;
        k = ks;
      }
    }
    k++;

    if (kase === 1) {
      let f = e[p - 2]!;
      e[p - 2] = 0;
      for (let j = p - 2; j >= k; j--) {
        const t = Math.hypot(s[j]!, f);
        const cs = s[j]! / t, sn = f / t;
        s[j] = t;
        if (j !== k) {
          f = -sn * e[j - 1]!;
          e[j - 1] = cs * e[j - 1]!;
        }
        rotate(V, n, j, p - 1, cs, sn);
      }
    } else if (kase === 2) {
      let f = e[k - 1]!;
      e[k - 1] = 0;
      for (let j = k; j < p; j++) {
        const t = Math.hypot(s[j]!, f);
        const cs = s[j]! / t, sn = f / t;
        s[j] = t;
        f = -sn * e[j]!;
        e[j] = cs * e[j]!;
        rotate(U, m, j, k - 1, cs, sn);
      }
    } else if (kase === 3) {
      // Wilkinson-style shift from the trailing 2x2 block.
      const scale = Math.max(Math.abs(s[p - 1]!), Math.abs(s[p - 2]!), Math.abs(e[p - 2]!), Math.abs(s[k]!), Math.abs(e[k]!));
      const sp = s[p - 1]! / scale, spm1 = s[p - 2]! / scale, epm1 = e[p - 2]! / scale;
      const sk = s[k]! / scale, ek = e[k]! / scale;
      const b = ((spm1 + sp) * (spm1 - sp) + epm1 * epm1) / 2;
      const c = sp * epm1 * (sp * epm1);
      let shift = 0;
      if (b !== 0 || c !== 0) {
        shift = Math.sqrt(b * b + c);
        if (b < 0) shift = -shift;
        shift = c / (b + shift);
      }
      let f = (sk + sp) * (sk - sp) + shift;
      let g = sk * ek;
      // Chase the bulge.
      for (let j = k; j < p - 1; j++) {
        let t = Math.hypot(f, g);
        let cs = f / t, sn = g / t;
        if (j !== k) e[j - 1] = t;
        f = cs * s[j]! + sn * e[j]!;
        e[j] = cs * e[j]! - sn * s[j]!;
        g = sn * s[j + 1]!;
        s[j + 1] = cs * s[j + 1]!;
        rotate(V, n, j, j + 1, cs, sn);
        t = Math.hypot(f, g);
        cs = f / t;
        sn = g / t;
        s[j] = t;
        f = cs * e[j]! + sn * s[j + 1]!;
        s[j + 1] = -sn * e[j]! + cs * s[j + 1]!;
        g = sn * e[j + 1]!;
        e[j + 1] = cs * e[j + 1]!;
        if (j < m - 1) rotate(U, m, j, j + 1, cs, sn);
      }
      e[p - 2] = f;
      iter++;
    } else {
      // Converged: make the singular value non-negative, then move it into descending order.
      if (s[k]! <= 0) {
        s[k] = s[k]! < 0 ? -s[k]! : 0;
        for (let i = 0; i <= pp; i++) V[k * n + i] = -V[k * n + i]!;
      }
      while (k < pp) {
        if (s[k]! >= s[k + 1]!) break;
        const t = s[k]!;
        s[k] = s[k + 1]!;
        s[k + 1] = t;
        if (k < n - 1) swapColumns(V, n, k, k + 1);
        if (k < m - 1) swapColumns(U, m, k, k + 1);
        k++;
      }
      iter = 0;
      p--;
    }
  }

  // Row-major thin outputs: U [m, nu], V [n, nu].
  const Uo = new Float64Array(m * nu);
  for (let j = 0; j < nu; j++) for (let i = 0; i < m; i++) Uo[i * nu + j] = U[j * m + i]!;
  const Vo = new Float64Array(n * nu);
  for (let j = 0; j < nu; j++) for (let i = 0; i < n; i++) Vo[i * nu + j] = V[j * n + i]!;
  return { rows: m, cols: n, rank: nu, U: Uo, S: s.slice(0, nu), V: Vo };
}

function swapColumns(M: Float64Array, len: number, j: number, k: number): void {
  const cj = j * len, ck = k * len;
  for (let i = 0; i < len; i++) {
    const t = M[cj + i]!;
    M[cj + i] = M[ck + i]!;
    M[ck + i] = t;
  }
}

/** max |A - U diag(S) V^T| over all elements (a check for tests and model loading). */
export function svdReconstructionError(a: ArrayLike<number>, d: Svd): number {
  const { rows, cols, rank, U, S, V } = d;
  let worst = 0;
  const row = new Float64Array(cols);
  for (let i = 0; i < rows; i++) {
    row.fill(0);
    for (let k = 0; k < rank; k++) {
      const us = U[i * rank + k]! * S[k]!;
      if (us === 0) continue;
      for (let j = 0; j < cols; j++) row[j]! += us * V[j * rank + k]!;
    }
    for (let j = 0; j < cols; j++) worst = Math.max(worst, Math.abs(a[i * cols + j]! - row[j]!));
  }
  return worst;
}

/** max |Q^T Q - I| for a row-major [rows, cols] matrix Q (orthonormal columns give 0). */
export function orthogonalityError(q: ArrayLike<number>, rows: number, cols: number): number {
  // Gram matrix via the transposed copy, so the dot products run over contiguous memory.
  const t = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) t[j * rows + i] = q[i * cols + j]!;
  let worst = 0;
  for (let a = 0; a < cols; a++) {
    for (let b = a; b < cols; b++) {
      let dot = 0;
      for (let i = 0; i < rows; i++) dot += t[a * rows + i]! * t[b * rows + i]!;
      worst = Math.max(worst, Math.abs(dot - (a === b ? 1 : 0)));
    }
  }
  return worst;
}
