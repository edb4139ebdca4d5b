//! `samr partition`: one box list from a file, partitioned once.

use crate::setup::RankArgs;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use samr_kernel::{BoxList, BoxPartition, Domain, LevelBox, Rect, SamrError};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `samr partition`.
#[derive(Debug, Args)]
pub struct PartitionArgs {
    /// The boxes: one per line, `LEVEL X0 Y0 X1 Y1` (cells [X0, X1) x [Y0, Y1) of that
    /// level); `#` starts a comment.
    #[arg(long)]
    boxes: PathBuf,
    /// Level-0 cells per side of the domain.
    #[arg(long, default_value_t = 64)]
    n0: i64,
    /// The finest level a box may have.
    #[arg(long, default_value_t = 4)]
    max_level: u8,
    /// Minimum box size: no cut leaves fewer cells along its axis.
    #[arg(long, default_value_t = 4)]
    min_box: i64,
    /// Print the partition as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    ranks: RankArgs,
}

/// Reads the boxes, partitions them and prints the result.
pub fn run(a: &PartitionArgs) -> Result<()> {
    let domain = Domain::new(a.n0, a.max_level).context("--n0/--max-level")?;
    domain.check_min_box(a.min_box).context("--min-box")?;
    let list = read_boxes(&a.boxes, domain)?;
    let r = a.ranks.resolve(1)?;
    let method = a.ranks.method(&r)?;
    let p = method.partition(&list, a.min_box)?;
    let text = if a.json {
        let v = serde_json::json!({
            "partitioner": method.name(),
            "capacities": r.capacities,
            "patches": p.patches,
            "work": p.work,
            "ideal": p.ideal,
            "imbalance_percent": p.imbalance_percent(),
        });
        format!("{v}\n")
    } else {
        table(&p, &r.capacities)
    };
    cli_support::emit(&text)
}

/// The per-rank table and the patches.
fn table(p: &BoxPartition, c: &[f64]) -> String {
    let mut s = String::from("rank  capacity      work     ideal   I_k %  boxes\n");
    let boxes = p.boxes_per_rank();
    for (k, i) in p.imbalance_percent().iter().enumerate() {
        let _ = writeln!(
            s,
            "{k:>4}  {:>8.4}  {:>8}  {:>8.1}  {i:>6.2}  {:>5}",
            c[k], p.work[k], p.ideal[k], boxes[k]
        );
    }
    for q in &p.patches {
        let _ = writeln!(s, "level {} {} -> rank {}", q.b.level, q.b.rect, q.rank);
    }
    s
}

/// Parses a box file; errors name the file and line.
pub fn read_boxes(path: &std::path::Path, domain: Domain) -> Result<BoxList> {
    // A box file of a million boxes is about 40 MiB.
    let bytes = part_api::file::read_bounded(path, 64 << 20, "a box file")
        .with_context(|| format!("cannot read {}", path.display()))?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    let name = path.display();
    let mut boxes = Vec::new();
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let v: Vec<i64> = body
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()
            .filter(|v: &Vec<i64>| v.len() == 5 && (0..=255).contains(&v[0]))
            .ok_or_else(|| {
                anyhow!(
                    "{name}:{}: expected `LEVEL X0 Y0 X1 Y1` (a level 0..255 and four integers), found `{body}`",
                    n + 1
                )
            })?;
        boxes.push(LevelBox {
            level: v[0] as u8,
            rect: Rect::new([v[1], v[2]], [v[3], v[4]]),
        });
        lines.push(n + 1);
    }
    if boxes.is_empty() {
        bail!("{name}: no boxes");
    }
    BoxList::new(domain, boxes).map_err(|e| match &e {
        SamrError::BadBox { index, .. } => anyhow!("{name}:{}: {e}", lines[*index]),
        SamrError::Overlap { a, b, .. } => {
            anyhow!("{name}:{} and {}: {e}", lines[*a], lines[*b])
        }
        _ => anyhow!("{name}: {e}"),
    })
}
