//! P1 stiffness assembly into compressed sparse rows, Dirichlet rows eliminated.

use crate::exact::ExactSum;
use crate::mesh::{Mesh, NONE};

/// The linear system A u = b of one mesh. Rows are vertices (in the mesh's vertex order).
/// Interior rows hold the P1 stiffness matrix restricted to interior columns; the Dirichlet
/// columns are moved to the right-hand side. Boundary rows are identity rows with b = g, so a
/// vector that carries the Dirichlet data on the boundary is consistent with the system and
/// every Krylov update stays zero there.
///
/// The diagonal is stored apart from the off-diagonal CSR entries (`row_ptr`, `col`, `val`).
/// Entries that are exactly zero are not stored.
#[derive(Debug, Clone, Default)]
pub struct System {
    pub(crate) row_ptr: Vec<u32>,
    pub(crate) col: Vec<u32>,
    pub(crate) val: Vec<f64>,
    pub(crate) diag: Vec<f64>,
    pub(crate) rhs: Vec<f64>,
    pub(crate) boundary_rows: usize,
    /// The assembled rows with a column that is not assembled (a rank's rows reading the
    /// halo), ascending; empty for a whole mesh.
    pub(crate) halo_rows: Vec<u32>,
}

/// The stiffness of element edge k (opposite vertex k): a_ij = ∫_T ∇φ_i·∇φ_j = −½ cot θ_k,
/// computed as −(a·b)/(2|a×b|) with a, b the edges from vertex k.
#[inline]
fn edge_weights(p: [[f64; 2]; 3]) -> [f64; 3] {
    let mut w = [0.0; 3];
    for k in 0..3 {
        let (o, i, j) = (p[k], p[(k + 1) % 3], p[(k + 2) % 3]);
        let a = [i[0] - o[0], i[1] - o[1]];
        let b = [j[0] - o[0], j[1] - o[1]];
        let cross = a[0] * b[1] - a[1] * b[0];
        w[k] = -(a[0] * b[0] + a[1] * b[1]) / (2.0 * cross.abs());
    }
    w
}

impl System {
    /// Assembles the system of `mesh`, taking the Dirichlet values from `u` at the boundary
    /// vertices (interior entries of `u` are not read). Edge-based: each edge's entry is the
    /// sum of the two elements' cotangent weights, written once into both rows.
    pub fn assemble(mesh: &Mesh, u: &[f64]) -> System {
        let mut sys = System::default();
        sys.assemble_into(mesh, u);
        sys
    }

    /// Like [`System::assemble`], reusing this system's allocations where it can.
    pub fn assemble_into(&mut self, mesh: &Mesh, u: &[f64]) {
        self.assemble_rows(mesh, u, |_| true);
    }

    /// Assembles the rows `i` with `owned(i)` (a rank's own vertices, whose elements are all
    /// present: owned or ghost); the other rows are empty identity rows with a zero
    /// right-hand side. Each owned row gets its entries in the order of the elements along the
    /// curve, exactly as in the whole mesh, so a rank's rows are bit-identical to the serial
    /// ones.
    pub(crate) fn assemble_rows(&mut self, mesh: &Mesh, u: &[f64], owned: impl Fn(usize) -> bool) {
        let nv = mesh.num_vertices();
        assert_eq!(u.len(), nv, "assemble: u must hold one value per vertex");
        let w = self.count_rows(mesh, &owned);
        self.fill_rows(mesh, u, &w, &owned);
        drop(w);
        self.row_ptr.truncate(nv + 1);
        self.finish_rows(mesh, u, &owned);
    }

    /// Pass 1 of [`System::assemble_rows`]: element weights and row lengths (an edge counts in
    /// both rows if both endpoints are interior; the element first along the curve owns the
    /// edge). Row i's length is accumulated in `row_ptr[i + 2]` so that, after the prefix sum,
    /// `row_ptr[i + 1]` is the start of row i: the fill pass uses it as the cursor of row i
    /// and leaves it at the end of row i, which is where it belongs. Returns the weights.
    #[inline]
    fn count_rows(&mut self, mesh: &Mesh, owned: &impl Fn(usize) -> bool) -> Vec<[f64; 3]> {
        let (nv, ne) = (mesh.num_vertices(), mesh.num_elements());
        let (bnd, tri, nbr) = (&mesh.boundary, &mesh.tri, &mesh.nbr);
        let mut w: Vec<[f64; 3]> = Vec::with_capacity(ne);
        self.row_ptr = vec![0; nv + 2];
        let row_ptr = &mut self.row_ptr;
        for t in 0..ne {
            let tv = tri[t];
            w.push(edge_weights(tv.map(|v| mesh.coords[v as usize])));
            for k in 0..3 {
                let n = nbr[t][k];
                if n != NONE && (n as usize) < t {
                    continue;
                }
                let (i, j) = (tv[(k + 1) % 3] as usize, tv[(k + 2) % 3] as usize);
                if !bnd[i] && !bnd[j] {
                    row_ptr[i + 2] += u32::from(owned(i));
                    row_ptr[j + 2] += u32::from(owned(j));
                }
            }
        }
        for i in 1..=nv {
            row_ptr[i + 1] += row_ptr[i];
        }
        w
    }

    /// Pass 2 of [`System::assemble_rows`]: each edge's value (the weights `w` of its two
    /// elements) into both rows, or into the right-hand side and diagonal of the interior row
    /// when the other end is a Dirichlet vertex. Fresh zeroed allocations come from the
    /// kernel's zero pages, which is cheaper than clearing reused memory.
    #[inline]
    fn fill_rows(
        &mut self,
        mesh: &Mesh,
        u: &[f64],
        w: &[[f64; 3]],
        owned: &impl Fn(usize) -> bool,
    ) {
        let (nv, ne) = (mesh.num_vertices(), mesh.num_elements());
        let (bnd, tri, nbr) = (&mesh.boundary, &mesh.tri, &mesh.nbr);
        let nnz = self.row_ptr[nv + 1] as usize;
        self.col = vec![0; nnz];
        self.val = vec![0.0; nnz];
        self.diag = vec![0.0; nv];
        self.rhs = vec![0.0; nv];
        let row_ptr = &mut self.row_ptr;
        let (col, val, diag, rhs) = (&mut self.col, &mut self.val, &mut self.diag, &mut self.rhs);
        for t in 0..ne {
            let tv = tri[t];
            for k in 0..3 {
                let n = nbr[t][k];
                let mut a = w[t][k];
                if n != NONE {
                    if (n as usize) < t {
                        continue;
                    }
                    a += w[n as usize][mesh.local_index(n, t as u32)];
                }
                let (i, j) = (tv[(k + 1) % 3] as usize, tv[(k + 2) % 3] as usize);
                match (bnd[i], bnd[j]) {
                    (false, false) => {
                        if owned(i) {
                            let p = row_ptr[i + 1] as usize;
                            col[p] = j as u32;
                            val[p] = a;
                            row_ptr[i + 1] += 1;
                        }
                        if owned(j) {
                            let q = row_ptr[j + 1] as usize;
                            col[q] = i as u32;
                            val[q] = a;
                            row_ptr[j + 1] += 1;
                        }
                    }
                    // Edges to Dirichlet vertices (few: near the boundary only).
                    (false, true) => {
                        if owned(i) {
                            rhs[i] -= a * u[j];
                            diag[i] -= a;
                        }
                    }
                    (true, false) => {
                        if owned(j) {
                            rhs[j] -= a * u[i];
                            diag[j] -= a;
                        }
                    }
                    (true, true) => {}
                }
            }
        }
    }

    /// Pass 3 of [`System::assemble_rows`]: drops exact zeros while computing the diagonal, in
    /// one streaming pass. On PHAML's right-isosceles meshes the edge shared by two
    /// hypotenuses has both opposite angles at 90°, so its entry −½(cot θ + cot θ') is exactly
    /// 0: about a third of the edges. The diagonal: the rows of the P1 Laplacian sum to zero,
    /// so a_ii = −Σ_j a_ij over all neighbours (the Dirichlet ones were added in pass 2).
    /// Boundary rows become identity rows with b = g, rows not `owned` empty identity rows.
    #[inline]
    fn finish_rows(&mut self, mesh: &Mesh, u: &[f64], owned: &impl Fn(usize) -> bool) {
        let nv = mesh.num_vertices();
        let bnd = &mesh.boundary;
        let row_ptr = &mut self.row_ptr;
        let (col, val, diag, rhs) = (&mut self.col, &mut self.val, &mut self.diag, &mut self.rhs);
        let mut nb = 0;
        let mut kept = 0usize;
        let mut start = 0usize;
        self.halo_rows.clear();
        for i in 0..nv {
            let end = row_ptr[i + 1] as usize;
            if !owned(i) {
                diag[i] = 1.0;
                rhs[i] = 0.0;
            } else if bnd[i] {
                diag[i] = 1.0;
                rhs[i] = u[i];
                nb += 1;
            } else {
                let mut sum = 0.0;
                let mut halo = false;
                for p in start..end {
                    let a = val[p];
                    sum += a;
                    if a != 0.0 {
                        col[kept] = col[p];
                        val[kept] = a;
                        kept += 1;
                        halo |= !owned(col[p] as usize);
                    }
                }
                diag[i] -= sum;
                if halo {
                    self.halo_rows.push(i as u32);
                }
            }
            start = end;
            row_ptr[i + 1] = kept as u32;
        }
        col.truncate(kept);
        col.shrink_to_fit();
        val.truncate(kept);
        val.shrink_to_fit();
        self.boundary_rows = nb;
    }

    /// Number of rows (vertices).
    pub fn num_rows(&self) -> usize {
        self.diag.len()
    }
    /// Number of stored (nonzero) off-diagonal entries.
    pub fn num_offdiagonal(&self) -> usize {
        self.col.len()
    }
    /// The diagonal (1 on Dirichlet rows).
    pub fn diagonal(&self) -> &[f64] {
        &self.diag
    }
    /// The right-hand side (the Dirichlet value on boundary rows).
    pub fn rhs(&self) -> &[f64] {
        &self.rhs
    }
    /// Off-diagonal entries of row i as (column, value) pairs.
    pub fn row(&self, i: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let (a, b) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        self.col[a..b]
            .iter()
            .zip(&self.val[a..b])
            .map(|(&c, &v)| (c as usize, v))
    }
    /// The off-diagonal part in compressed sparse rows: (row pointers, columns, values).
    /// Boundary rows are empty; interior rows hold interior columns only.
    pub fn csr(&self) -> (&[u32], &[u32], &[f64]) {
        (&self.row_ptr, &self.col, &self.val)
    }
    /// Bytes held by the matrix and right-hand side.
    pub fn heap_bytes(&self) -> usize {
        4 * (self.row_ptr.capacity() + self.col.capacity() + self.halo_rows.capacity())
            + 8 * (self.val.capacity() + self.diag.capacity() + self.rhs.capacity())
    }

    /// y = A x.
    pub fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.apply_rows(x, y, false, 0..self.diag.len());
    }

    /// y = A x on the rows in `rows` (the others are left as they are) and, if `dot`, the
    /// exact sum of x_i·y_i over those rows (one pass, as CG needs both).
    pub(crate) fn apply_rows(
        &self,
        x: &[f64],
        y: &mut [f64],
        dot: bool,
        rows: std::ops::Range<usize>,
    ) -> ExactSum {
        self.check_lengths(x, y, rows.end);
        let mut sum = ExactSum::new();
        self.apply_range(x, y, dot, rows, &mut sum);
        sum
    }

    /// [`System::apply_rows`] on the rows `0..end` that are not in `skip` (ascending).
    pub(crate) fn apply_rows_except(
        &self,
        x: &[f64],
        y: &mut [f64],
        dot: bool,
        end: usize,
        skip: &[u32],
    ) -> ExactSum {
        self.check_lengths(x, y, end);
        let mut sum = ExactSum::new();
        let mut at = 0;
        for &r in skip {
            self.apply_range(x, y, dot, at..r as usize, &mut sum);
            at = r as usize + 1;
        }
        self.apply_range(x, y, dot, at.min(end)..end, &mut sum);
        sum
    }

    /// [`System::apply_rows`] on the rows listed in `rows`, adding to `sum`.
    pub(crate) fn apply_rows_listed(
        &self,
        x: &[f64],
        y: &mut [f64],
        dot: bool,
        rows: &[u32],
        sum: &mut ExactSum,
    ) {
        let n = self.diag.len();
        self.check_lengths(x, y, 0);
        for &r in rows {
            let i = r as usize;
            assert!(i < n, "apply: row {i} of {n}");
            self.apply_range(x, y, dot, i..i + 1, sum);
        }
    }

    fn check_lengths(&self, x: &[f64], y: &[f64], end: usize) {
        let n = self.diag.len();
        assert!(
            x.len() == n && y.len() == n && end <= n,
            "apply: vectors must have one entry per row"
        );
    }

    #[inline(always)]
    fn apply_range(
        &self,
        x: &[f64],
        y: &mut [f64],
        dot: bool,
        rows: std::ops::Range<usize>,
        sum: &mut ExactSum,
    ) {
        let rp = &self.row_ptr;
        for i in rows {
            let (a, b) = (rp[i] as usize, rp[i + 1] as usize);
            let xi = x[i];
            let mut s = self.diag[i] * xi;
            for (&c, &v) in self.col[a..b].iter().zip(&self.val[a..b]) {
                s += v * x[c as usize];
            }
            y[i] = s;
            if dot {
                sum.add(s * xi);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Marks;

    /// Slow reference: element-by-element 3×3 matrices from gradients, into a dense matrix.
    fn dense_reference(mesh: &Mesh) -> Vec<Vec<f64>> {
        let n = mesh.num_vertices();
        let mut a = vec![vec![0.0; n]; n];
        for t in mesh.elements() {
            let p = t.map(|v| mesh.coords()[v as usize]);
            let det = (p[1][0] - p[0][0]) * (p[2][1] - p[0][1])
                - (p[2][0] - p[0][0]) * (p[1][1] - p[0][1]);
            // ∇φ_k = rot(p_{k+2} − p_{k+1}) / det
            let g: Vec<[f64; 2]> = (0..3)
                .map(|k| {
                    let (i, j) = (p[(k + 1) % 3], p[(k + 2) % 3]);
                    [(i[1] - j[1]) / det, (j[0] - i[0]) / det]
                })
                .collect();
            for r in 0..3 {
                for c in 0..3 {
                    a[t[r] as usize][t[c] as usize] +=
                        (g[r][0] * g[c][0] + g[r][1] * g[c][1]) * det.abs() / 2.0;
                }
            }
        }
        a
    }

    #[test]
    fn matches_dense_elementwise_reference() {
        let mut mesh = Mesh::unit_square();
        for round in 0..7 {
            let mut marks = Marks::new(mesh.num_elements());
            for t in (round % 3..mesh.num_elements()).step_by(2) {
                marks.mark_element(&mesh, t);
            }
            mesh.refine(&marks).unwrap();
        }
        let n = mesh.num_vertices();
        let u: Vec<f64> = mesh.coords().iter().map(|p| p[0] * p[0] - p[1]).collect();
        let sys = System::assemble(&mesh, &u);
        let dense = dense_reference(&mesh);
        let bnd = mesh.boundary_vertices();
        for i in 0..n {
            if bnd[i] {
                assert_eq!(sys.diag[i], 1.0);
                assert_eq!(sys.rhs[i], u[i]);
                assert_eq!(sys.row(i).count(), 0);
                continue;
            }
            assert!((sys.diag[i] - dense[i][i]).abs() < 1e-12);
            let mut row = vec![0.0; n];
            for (c, v) in sys.row(i) {
                assert!(v != 0.0 && row[c] == 0.0, "row {i}: zero or repeated entry");
                row[c] += v;
            }
            let mut rhs = 0.0;
            for j in 0..n {
                if j == i {
                    continue;
                }
                if bnd[j] {
                    rhs -= dense[i][j] * u[j];
                } else {
                    assert!((row[j] - dense[i][j]).abs() < 1e-12, "entry ({i},{j})");
                }
            }
            assert!((sys.rhs[i] - rhs).abs() < 1e-12);
        }
        // A linear function is reproduced exactly: A u = b.
        let lin: Vec<f64> = mesh
            .coords()
            .iter()
            .map(|p| 2.0 * p[0] - 3.0 * p[1] + 1.0)
            .collect();
        let sys = System::assemble(&mesh, &lin);
        let mut y = vec![0.0; n];
        sys.apply(&lin, &mut y);
        for (i, (yi, bi)) in y.iter().zip(&sys.rhs).enumerate() {
            assert!((yi - bi).abs() < 1e-12, "row {i}");
        }
    }
}
