//! Pictures and files: VTK `.vtu` (ParaView) and an SVG drawing of the mesh.

use crate::FemError;
use crate::mesh::Mesh;
use std::io::Write;
use std::path::Path;

/// Writes `path` whole or not at all (`part_api::file::write_atomic`): a reader never sees a
/// half-written file, whatever stops the run.
fn atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FemError> {
    part_api::file::write_atomic(path, write).map_err(|e| FemError::Io {
        path: e.path,
        cause: e.source,
    })
}

/// Cell and point fields for [`write_vtu`].
#[derive(Debug, Clone, Copy)]
pub struct VtuFields<'a> {
    /// The discrete solution (point data `u_h`).
    pub solution: &'a [f64],
    /// Per-element squared indicator η_T² (cell data `estimate`, written as η_T).
    pub indicators: &'a [f64],
    /// Per-element squared energy error (cell data `error`, written as its square root);
    /// may be empty.
    pub element_errors: &'a [f64],
    /// The rank that owns these elements (cell data `rank`; 0 in one process).
    pub rank: u32,
}

/// Writes the mesh as an unstructured-grid `.vtu` file with raw appended binary data:
/// points, triangles, cell data `level`, `rank`, `sfc_index` (position along the curve in this
/// file), `estimate`, `error` (if given), and point data `u_h`.
pub fn write_vtu(path: &Path, mesh: &Mesh, fields: &VtuFields<'_>) -> Result<(), FemError> {
    atomic(path, |mut w| write_vtu_to(&mut w, mesh, fields))
}

/// One data array of a `.vtu` file: name, type, components and bytes.
type VtuArray = (&'static str, &'static str, usize, usize);

fn write_vtu_to(w: &mut impl Write, mesh: &Mesh, f: &VtuFields<'_>) -> std::io::Result<()> {
    let nv = mesh.num_vertices();
    let ne = mesh.num_elements();
    assert_eq!(f.solution.len(), nv, "write_vtu: solution length");
    assert_eq!(f.indicators.len(), ne, "write_vtu: indicators length");
    let with_error = f.element_errors.len() == ne;
    // In the order of the appended block.
    let mut arrays: Vec<VtuArray> = vec![
        ("Points", "Float64", 3, 24 * nv),
        ("connectivity", "UInt32", 1, 12 * ne),
        ("offsets", "UInt32", 1, 4 * ne),
        ("types", "UInt8", 1, ne),
        ("level", "UInt8", 1, ne),
        ("rank", "UInt32", 1, 4 * ne),
        ("sfc_index", "UInt32", 1, 4 * ne),
        ("estimate", "Float64", 1, 8 * ne),
    ];
    if with_error {
        arrays.push(("error", "Float64", 1, 8 * ne));
    }
    arrays.push(("u_h", "Float64", 1, 8 * nv));
    vtu_header(w, &arrays, (nv, ne))?;
    write!(w, "_")?;
    vtu_data(w, mesh, f, with_error)?;
    writeln!(w, "\n</AppendedData>\n</VTKFile>")
}

/// The XML of a `.vtu` file of `nv` points and `ne` cells whose appended block holds `arrays`
/// (each after its 8-byte length), up to the block.
fn vtu_header(
    w: &mut impl Write,
    arrays: &[VtuArray],
    (nv, ne): (usize, usize),
) -> std::io::Result<()> {
    let mut offsets = Vec::new();
    let mut off = 0usize;
    for a in arrays {
        offsets.push(off);
        off += 8 + a.3;
    }
    let da = |i: usize| {
        let (name, ty, nc, _) = arrays[i];
        format!(
            "<DataArray type=\"{ty}\" Name=\"{name}\" NumberOfComponents=\"{nc}\" \
             format=\"appended\" offset=\"{}\"/>\n",
            offsets[i]
        )
    };
    writeln!(w, "<?xml version=\"1.0\"?>")?;
    writeln!(
        w,
        "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" \
         header_type=\"UInt64\">"
    )?;
    writeln!(
        w,
        "<UnstructuredGrid>\n<Piece NumberOfPoints=\"{nv}\" NumberOfCells=\"{ne}\">"
    )?;
    write!(
        w,
        "<Points>\n{}</Points>\n<Cells>\n{}{}{}</Cells>\n",
        da(0),
        da(1),
        da(2),
        da(3)
    )?;
    let nc = arrays.len() - 1;
    writeln!(w, "<CellData Scalars=\"level\">")?;
    for i in 4..nc {
        write!(w, "{}", da(i))?;
    }
    write!(
        w,
        "</CellData>\n<PointData Scalars=\"u_h\">\n{}</PointData>\n",
        da(nc)
    )?;
    writeln!(
        w,
        "</Piece>\n</UnstructuredGrid>\n<AppendedData encoding=\"raw\">"
    )
}

/// The appended block of a `.vtu` file: each array of [`write_vtu_to`] after its length.
fn vtu_data(
    w: &mut impl Write,
    mesh: &Mesh,
    f: &VtuFields<'_>,
    with_error: bool,
) -> std::io::Result<()> {
    let (nv, ne) = (mesh.num_vertices(), mesh.num_elements());
    let block = |w: &mut dyn Write,
                 bytes: usize,
                 body: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>|
     -> std::io::Result<()> {
        w.write_all(&(bytes as u64).to_le_bytes())?;
        body(w)
    };
    block(w, 24 * nv, &mut |w| {
        for p in mesh.coords() {
            for x in [p[0], p[1], 0.0] {
                w.write_all(&x.to_le_bytes())?;
            }
        }
        Ok(())
    })?;
    block(w, 12 * ne, &mut |w| {
        for t in mesh.elements() {
            for v in t {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        Ok(())
    })?;
    block(w, 4 * ne, &mut |w| {
        for i in 1..=ne as u32 {
            w.write_all(&(3 * i).to_le_bytes())?;
        }
        Ok(())
    })?;
    block(w, ne, &mut |w| w.write_all(&vec![5u8; ne]))?;
    block(w, ne, &mut |w| w.write_all(mesh.levels()))?;
    block(w, 4 * ne, &mut |w| {
        for _ in 0..ne {
            w.write_all(&f.rank.to_le_bytes())?;
        }
        Ok(())
    })?;
    block(w, 4 * ne, &mut |w| {
        for i in 0..ne as u32 {
            w.write_all(&i.to_le_bytes())?;
        }
        Ok(())
    })?;
    block(w, 8 * ne, &mut |w| {
        for e in f.indicators {
            w.write_all(&e.max(0.0).sqrt().to_le_bytes())?;
        }
        Ok(())
    })?;
    if with_error {
        block(w, 8 * ne, &mut |w| {
            for e in f.element_errors {
                w.write_all(&e.max(0.0).sqrt().to_le_bytes())?;
            }
            Ok(())
        })?;
    }
    block(w, 8 * nv, &mut |w| {
        for x in f.solution {
            w.write_all(&x.to_le_bytes())?;
        }
        Ok(())
    })
}

/// Writes the elements `keep[t]` of `mesh` (a rank's owned elements of its local part) as one
/// piece of a parallel VTK file: the vertices they use, renumbered, with their fields.
pub fn write_vtu_piece(
    path: &Path,
    mesh: &Mesh,
    keep: &[bool],
    fields: &VtuFields<'_>,
) -> Result<(), FemError> {
    let mut new = vec![crate::mesh::NONE; mesh.num_vertices()];
    let mut part = Mesh::unit_square();
    part.coords.clear();
    part.parents.clear();
    part.boundary.clear();
    part.tri.clear();
    part.nbr.clear();
    part.level.clear();
    let mut u = Vec::new();
    let (mut eta, mut err) = (Vec::new(), Vec::new());
    for (t, tv) in mesh.tri.iter().enumerate() {
        if !keep[t] {
            continue;
        }
        let tri = tv.map(|v| {
            if new[v as usize] == crate::mesh::NONE {
                new[v as usize] = part.coords.len() as u32;
                part.coords.push(mesh.coords[v as usize]);
                part.boundary.push(mesh.boundary[v as usize]);
                part.parents.push([crate::mesh::NONE; 2]);
                u.push(fields.solution[v as usize]);
            }
            new[v as usize]
        });
        part.tri.push(tri);
        part.nbr.push([crate::mesh::NONE; 3]);
        part.level.push(mesh.level[t]);
        eta.push(fields.indicators[t]);
        if fields.element_errors.len() == mesh.num_elements() {
            err.push(fields.element_errors[t]);
        }
    }
    let f = VtuFields {
        solution: &u,
        indicators: &eta,
        element_errors: &err,
        rank: fields.rank,
    };
    write_vtu(path, &part, &f)
}

/// Writes the parallel VTK file (`.pvtu`) that joins the pieces `pieces` (file names
/// relative to it).
pub fn write_pvtu(path: &Path, pieces: &[String], with_error: bool) -> Result<(), FemError> {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"PUnstructuredGrid\" version=\"1.0\" \
         byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<PUnstructuredGrid GhostLevel=\"0\">\n\
         <PPoints><PDataArray type=\"Float64\" NumberOfComponents=\"3\"/></PPoints>\n\
         <PCellData Scalars=\"level\">\n<PDataArray type=\"UInt8\" Name=\"level\"/>\n\
         <PDataArray type=\"UInt32\" Name=\"rank\"/>\n<PDataArray type=\"UInt32\" Name=\"sfc_index\"/>\n\
         <PDataArray type=\"Float64\" Name=\"estimate\"/>\n",
    );
    if with_error {
        s.push_str("<PDataArray type=\"Float64\" Name=\"error\"/>\n");
    }
    s.push_str("</PCellData>\n<PPointData Scalars=\"u_h\"><PDataArray type=\"Float64\" Name=\"u_h\"/></PPointData>\n");
    for p in pieces {
        s.push_str(&format!("<Piece Source=\"{p}\"/>\n"));
    }
    s.push_str("</PUnstructuredGrid>\n</VTKFile>\n");
    atomic(path, |w| w.write_all(s.as_bytes()))
}

/// Writes a ParaView collection (`.pvd`) listing the per-step `.vtu` files.
pub fn write_pvd(path: &Path, files: &[(usize, String)]) -> Result<(), FemError> {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\">\n<Collection>\n",
    );
    for (step, name) in files {
        s.push_str(&format!("<DataSet timestep=\"{step}\" file=\"{name}\"/>\n"));
    }
    s.push_str("</Collection>\n</VTKFile>\n");
    atomic(path, |w| w.write_all(s.as_bytes()))
}

/// Colour of a refinement level on a blue (coarse) to red (fine) scale.
fn level_colour(level: u8, max_level: u8) -> String {
    let x = if max_level == 0 {
        0.0
    } else {
        level as f64 / max_level as f64
    };
    // A short perceptual ramp (viridis-like stops).
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let s = x * (STOPS.len() - 1) as f64;
    let i = (s.floor() as usize).min(STOPS.len() - 2);
    let f = s - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let c = |u: f64, v: f64| (u + f * (v - u)).round() as u8;
    format!("#{:02x}{:02x}{:02x}", c(a.0, b.0), c(a.1, b.1), c(a.2, b.2))
}

/// Draws the mesh as SVG: four panels, the whole square and zooms on the corner (0, 0)
/// (×32, ×1024, ×32768), elements coloured by level. Elements at least `MIN_PX` pixels across
/// are drawn with their edges; smaller ones are merged into per-pixel squares coloured by
/// the deepest level they hold, so the file stays small for any mesh size.
pub fn write_svg(path: &Path, mesh: &Mesh, title: &str) -> Result<(), FemError> {
    let s = svg_string(mesh, title, Colouring::Level);
    atomic(path, |w| w.write_all(s.as_bytes()))
}

/// Like [`write_svg`], elements coloured by the rank that owns them (`ranks[t]`): the
/// partition of a distributed run.
pub fn write_svg_ranks(
    path: &Path,
    mesh: &Mesh,
    ranks: &[u32],
    title: &str,
) -> Result<(), FemError> {
    assert_eq!(ranks.len(), mesh.num_elements(), "one rank per element");
    let s = svg_string(mesh, title, Colouring::Rank(ranks));
    atomic(path, |w| w.write_all(s.as_bytes()))
}

/// What the colours of an SVG drawing show.
#[derive(Debug, Clone, Copy)]
enum Colouring<'a> {
    Level,
    Rank(&'a [u32]),
}

/// A categorical colour for rank r (Tableau 10, repeating).
fn rank_colour(r: u8) -> String {
    const C: [&str; 10] = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f", "#bab0ac",
    ];
    C[r as usize % C.len()].to_string()
}

const PANEL: f64 = 360.0;
const MIN_PX: f64 = 3.0;

/// The value drawn per element (at most 254: `u8::MAX` marks an empty pixel) and the colour
/// of a value.
struct Paint<'a> {
    value: &'a dyn Fn(usize) -> u8,
    colour: &'a dyn Fn(u8) -> String,
}

fn svg_string(mesh: &Mesh, title: &str, colouring: Colouring<'_>) -> String {
    use std::fmt::Write as _;
    let zooms = [1.0f64, 32.0, 1024.0, 32768.0];
    let (w, h) = (4.0 * PANEL + 5.0 * 20.0, PANEL + 110.0);
    let max_level = mesh.max_level();
    let (value, max_value, legend): (Box<dyn Fn(usize) -> u8>, u8, &str) = match colouring {
        Colouring::Level => (Box::new(|t| mesh.levels()[t]), max_level, "level"),
        Colouring::Rank(r) => (
            Box::new(move |t| (r[t] % 254) as u8),
            r.iter().map(|&x| (x % 254) as u8).max().unwrap_or(0),
            "rank",
        ),
    };
    let colour = |v: u8| match colouring {
        Colouring::Level => level_colour(v, max_value),
        Colouring::Rank(_) => rank_colour(v),
    };
    let paint = Paint {
        value: &*value,
        colour: &colour,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"13\">"
    );
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        out,
        "<text x=\"20\" y=\"24\" font-size=\"16\">{} — {} vertices, {} elements, levels 0–{}</text>",
        xml_escape(title),
        mesh.num_vertices(),
        mesh.num_elements(),
        max_level
    );
    for (pi, &z) in zooms.iter().enumerate() {
        svg_panel(&mut out, mesh, (pi, z), &paint);
    }
    svg_legend(&mut out, legend, max_value, &colour);
    out.push_str("</svg>\n");
    out
}

/// Panel `pi` of an SVG drawing: the square `[0, 1/z]²`, its large elements as polygons and
/// the small ones merged into pixels.
fn svg_panel(out: &mut String, mesh: &Mesh, (pi, z): (usize, f64), paint: &Paint<'_>) {
    use std::fmt::Write as _;
    let ox = 20.0 + pi as f64 * (PANEL + 20.0);
    let oy = 40.0;
    let side = 1.0 / z; // the panel shows [0, side]²
    let _ = writeln!(
        out,
        "<g><text x=\"{ox}\" y=\"{}\">[0, {}]² (zoom ×{z})</text>",
        oy + PANEL + 18.0,
        fmt_num(side)
    );
    let _ = writeln!(
        out,
        "<svg x=\"{ox}\" y=\"{oy}\" width=\"{PANEL}\" height=\"{PANEL}\" \
         viewBox=\"0 0 {PANEL} {PANEL}\">"
    );
    let (polys, pixels) = rasterise(mesh, side, paint);
    let _ = writeln!(out, "<g stroke=\"#222\" stroke-width=\"0.4\">\n{polys}</g>");
    let _ = writeln!(out, "<g stroke=\"none\">");
    // Runs of equal pixels along each row become one rectangle.
    let npx = PANEL as usize;
    for y in 0..npx {
        let row = &pixels[y * npx..(y + 1) * npx];
        let mut x = 0;
        while x < npx {
            let l = row[x];
            let mut e = x + 1;
            while e < npx && row[e] == l {
                e += 1;
            }
            if l != u8::MAX {
                let _ = writeln!(
                    out,
                    "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"1\" fill=\"{}\"/>",
                    npx - 1 - y,
                    e - x,
                    (paint.colour)(l)
                );
            }
            x = e;
        }
    }
    let _ = writeln!(
        out,
        "</g>\n<rect width=\"{PANEL}\" height=\"{PANEL}\" fill=\"none\" stroke=\"black\"/>\n</svg></g>"
    );
}

/// The elements in the panel showing `[0, side]²`: those at least [`MIN_PX`] pixels across
/// as polygons, and the others' values in the panel's pixels (the largest value that touches
/// each pixel; `u8::MAX` where none does).
fn rasterise(mesh: &Mesh, side: f64, paint: &Paint<'_>) -> (String, Vec<u8>) {
    use std::fmt::Write as _;
    let scale = PANEL / side;
    let c = mesh.coords();
    let npx = PANEL as usize;
    let mut pixels = vec![u8::MAX; npx * npx];
    let mut polys = String::new();
    for (t, tv) in mesh.elements().iter().enumerate() {
        let p = tv.map(|v| c[v as usize]);
        let (xmin, xmax) = (
            p[0][0].min(p[1][0]).min(p[2][0]),
            p[0][0].max(p[1][0]).max(p[2][0]),
        );
        let (ymin, ymax) = (
            p[0][1].min(p[1][1]).min(p[2][1]),
            p[0][1].max(p[1][1]).max(p[2][1]),
        );
        if xmin >= side || ymin >= side {
            continue;
        }
        let level = (paint.value)(t);
        let size = (xmax - xmin).max(ymax - ymin) * scale;
        if size >= MIN_PX {
            let pts: Vec<String> = p
                .iter()
                .map(|q| format!("{:.1},{:.1}", q[0] * scale, PANEL - q[1] * scale))
                .collect();
            let _ = writeln!(
                polys,
                "<polygon points=\"{}\" fill=\"{}\"/>",
                pts.join(" "),
                (paint.colour)(level)
            );
        } else {
            // Every pixel the element's bounding box touches (at most 3×3).
            let (x0, x1) = (
                (xmin * scale) as usize,
                ((xmax * scale) as usize).min(npx - 1),
            );
            let (y0, y1) = (
                (ymin * scale) as usize,
                ((ymax * scale) as usize).min(npx - 1),
            );
            for y in y0..=y1 {
                for x in x0..=x1 {
                    let px = &mut pixels[y * npx + x];
                    if *px == u8::MAX || level > *px {
                        *px = level;
                    }
                }
            }
        }
    }
    (polys, pixels)
}

/// The legend under the panels: up to 40 swatches from 0 to `max_value`.
fn svg_legend(out: &mut String, legend: &str, max_value: u8, colour: &dyn Fn(u8) -> String) {
    use std::fmt::Write as _;
    let ly = 40.0 + PANEL + 34.0;
    let _ = writeln!(out, "<text x=\"20\" y=\"{}\">{legend}</text>", ly + 12.0);
    let steps = (max_value as usize + 1).min(40);
    for i in 0..steps {
        let l = if steps == 1 {
            0
        } else {
            (i * max_value as usize / (steps - 1)) as u8
        };
        let x = 70.0 + i as f64 * 16.0;
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{ly}\" width=\"16\" height=\"16\" fill=\"{}\"/>",
            colour(l)
        );
        if i % 5 == 0 || i + 1 == steps {
            let _ = writeln!(out, "<text x=\"{x}\" y=\"{}\">{l}</text>", ly + 32.0);
        }
    }
}

fn fmt_num(x: f64) -> String {
    if x >= 1.0 {
        format!("{x}")
    } else {
        format!("{x:.3e}")
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Marks;

    fn small_mesh() -> Mesh {
        let mut m = Mesh::unit_square();
        for _ in 0..6 {
            let mut marks = Marks::new(m.num_elements());
            marks.mark_element(&m, 0);
            marks.mark_element(&m, m.num_elements() - 1);
            m.refine(&marks).unwrap();
        }
        m
    }

    #[test]
    fn vtu_has_consistent_offsets_and_sizes() {
        let m = small_mesh();
        let (nv, ne) = (m.num_vertices(), m.num_elements());
        let u = vec![1.0; nv];
        let eta = vec![4.0; ne];
        let mut buf = Vec::new();
        write_vtu_to(
            &mut buf,
            &m,
            &VtuFields {
                solution: &u,
                indicators: &eta,
                element_errors: &[],
                rank: 3,
            },
        )
        .unwrap();
        let text = String::from_utf8_lossy(&buf);
        assert!(text.contains(&format!("NumberOfPoints=\"{nv}\" NumberOfCells=\"{ne}\"")));
        assert!(text.contains("Name=\"level\"") && !text.contains("Name=\"error\""));
        // Appended block: 9 arrays, each with its byte-count header; total bytes add up.
        let start = buf.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        let expect =
            9 * 8 + 24 * nv + 12 * ne + 4 * ne + ne + ne + 4 * ne + 4 * ne + 8 * ne + 8 * nv;
        let end = buf.len() - "\n</AppendedData>\n</VTKFile>\n".len();
        assert_eq!(end - start, expect);
        // First block header is the points' byte count.
        let h = u64::from_le_bytes(buf[start..start + 8].try_into().unwrap());
        assert_eq!(h as usize, 24 * nv);
    }

    #[test]
    fn svg_draws_every_panel_and_writing_fails_with_the_path() {
        let m = small_mesh();
        let s = svg_string(&m, "test <mesh>", Colouring::Level);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("zoom ×").count(), 4);
        assert!(s.contains("test &lt;mesh&gt;"));
        assert!(s.matches("<polygon").count() >= m.num_elements() / 2);
        let ranks: Vec<u32> = (0..m.num_elements() as u32).map(|t| t % 3).collect();
        let r = svg_string(&m, "p", Colouring::Rank(&ranks));
        assert!(r.contains(&rank_colour(2)) && r.contains(">rank<"));
        let bad = Path::new("/nonexistent-dir/x.svg");
        let e = write_svg(bad, &m, "t").unwrap_err().to_string();
        assert!(e.contains("/nonexistent-dir/x.svg"), "{e}");
    }
}
