//! From flags to the kernel's values: ranks and capacities, the box method, the two-phase
//! scheme.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use cli_support::power::PowerArgs;
use drum_model::{Machine, Powers};
use hier_part::Plan;
use samr_kernel::lan::{LinkModel, Policy};
use samr_kernel::{
    Balancer, BoxMethod, Clock, LinkSource, LocalMethod, SwitchNode, TwoPhase, TwoPhaseConfig,
    normalise_capacities, switch_plan,
};
use std::path::PathBuf;

/// `--partitioner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PartitionerArg {
    /// Sinha & Parashar's ACEHeterogeneous: boxes in proportion to the ranks' capacities.
    Ace,
    /// GrACE's default: boxes along a Hilbert curve into equal parts.
    Sfc,
    /// Box centres along the machine tree with hier-part (needs --machine).
    Hier,
}

/// Who the ranks are and what they can do: the flags every command shares.
#[derive(Debug, Clone, Args)]
pub struct RankArgs {
    /// Number of ranks (default: the machine's ranks, the capacities' count, or 1; under
    /// --backend mpi the processes mpirun started).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// The machine description; its ranks are the run's. Its powers (see --model) are the
    /// ranks' capacities unless --capacities is given.
    #[arg(long)]
    pub machine: Option<PathBuf>,
    /// Relative capacity of each rank, comma-separated (e.g. 0.16,0.19,0.31,0.34); each
    /// finite and > 0. Default: the machine's powers, or equal.
    #[arg(long, value_delimiter = ',')]
    pub capacities: Option<Vec<f64>>,
    /// The box partitioner (with --scheme two-phase: the local phase's, ace or sfc).
    #[arg(long, value_enum, default_value_t = PartitionerArg::Ace)]
    pub partitioner: PartitionerArg,
    /// hier: halve boxes larger than this fraction of the smallest rank's share.
    #[arg(long, default_value_t = 0.25)]
    pub max_share: f64,
    #[command(flatten)]
    pub power: PowerArgs,
}

/// The ranks, the machine and the capacities, resolved from [`RankArgs`].
#[derive(Debug)]
pub struct Ranks {
    /// How many.
    pub ranks: usize,
    /// The machine and its powers, when given.
    pub machine: Option<(Machine, Powers)>,
    /// Relative capacities, normalised.
    pub capacities: Vec<f64>,
}

impl RankArgs {
    /// Reads the machine, checks the rank count and the capacities; `default_ranks` when
    /// neither --ranks, --machine nor --capacities gives the count.
    pub fn resolve(&self, default_ranks: usize) -> Result<Ranks> {
        if self.ranks == Some(0) {
            bail!("--ranks 0: a run needs at least one rank");
        }
        let machine = match &self.machine {
            None => None,
            Some(path) => {
                let m = Machine::from_file(path)
                    .with_context(|| format!("--machine {}", path.display()))?;
                let (p, _) = self.power.compute(&m).context("the machine's powers")?;
                Some((m, p))
            }
        };
        let ranks = match (self.ranks, &machine) {
            (Some(r), Some((m, _))) if r != m.num_ranks() => bail!(
                "--ranks {r} but the machine has {} ranks: a machine's ranks are the run's",
                m.num_ranks()
            ),
            (Some(r), _) => r,
            (None, Some((m, _))) => m.num_ranks(),
            (None, None) => self.capacities.as_ref().map_or(default_ranks, Vec::len),
        };
        let raw = match (&self.capacities, &machine) {
            (Some(c), _) => {
                if c.len() != ranks {
                    bail!("--capacities has {} values for {ranks} ranks", c.len());
                }
                c.clone()
            }
            (None, Some((_, p))) => p.part_sizes().to_vec(),
            (None, None) => vec![1.0; ranks],
        };
        let capacities = normalise_capacities(&raw).context("--capacities")?;
        Ok(Ranks {
            ranks,
            machine,
            capacities,
        })
    }

    /// The machine's plan (for hier, and the two-phase scheme's groups and link).
    pub fn plan(r: &Ranks) -> Result<Option<Plan>> {
        r.machine
            .as_ref()
            .map(|(m, p)| Plan::new(m, p).context("the machine's plan"))
            .transpose()
    }

    /// The flat box method.
    pub fn method(&self, r: &Ranks) -> Result<BoxMethod> {
        Ok(match self.partitioner {
            PartitionerArg::Ace => BoxMethod::Ace {
                capacities: r.capacities.clone(),
            },
            PartitionerArg::Sfc => BoxMethod::Sfc { ranks: r.ranks },
            PartitionerArg::Hier => {
                let Some(plan) = Self::plan(r)? else {
                    bail!(
                        "--partitioner hier needs --machine (it partitions along the machine tree)"
                    );
                };
                BoxMethod::Hier {
                    plan: Box::new(plan),
                    max_share: self.max_share,
                }
            }
        })
    }
}

/// `--scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemeArg {
    /// One partitioner over all ranks at each regrid.
    Flat,
    /// Lan, Taylor & Bryan: a global phase between groups after each level-0 step, a local
    /// phase inside each group.
    TwoPhase,
}

/// The two-phase scheme's flags.
#[derive(Debug, Clone, Args)]
pub struct TwoPhaseArgs {
    /// Balancing scheme.
    #[arg(long, value_enum, default_value_t = SchemeArg::Flat)]
    pub scheme: SchemeArg,
    /// two-phase without --machine: this many groups of consecutive ranks (default 2; with
    /// a machine the groups are the children of its root).
    #[arg(long)]
    pub groups: Option<usize>,
    /// Redistribute between groups only when Gain > gamma * Cost (Lan §4.4; 2 in the paper).
    #[arg(long, default_value_t = 2.0)]
    pub gamma: f64,
    /// Consider redistributing only when the groups' efficiency is below this.
    #[arg(long, default_value_t = 0.95)]
    pub eff_min: f64,
    /// Fixed link between groups "ALPHA,BETA" (seconds, seconds per byte) instead of
    /// measuring it at each global phase.
    #[arg(long, value_name = "ALPHA,BETA", value_parser = parse_link)]
    pub link: Option<LinkModel>,
    /// Without --link: measure the link at the first global phase and then at every this
    /// many (1: at each, as Lan et al. do; a probe costs as much as many steps of a small run).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub link_every: u64,
    /// Model the step time instead of measuring it: seconds per unit of work.
    #[arg(long)]
    pub model_clock: Option<f64>,
    /// With --model-clock: delta, the redistribution cost from history, in seconds.
    #[arg(long, default_value_t = 0.0, requires = "model_clock")]
    pub model_delta: f64,
    /// Level-0 cells per side of the grids the global phase moves (default: n0 / 16).
    #[arg(long)]
    pub grid: Option<i64>,
}

impl TwoPhaseArgs {
    /// The balancer of a run on `n0` level-0 cells per side.
    pub fn balancer(&self, rank_args: &RankArgs, r: &Ranks, n0: i64) -> Result<Balancer> {
        if self.scheme == SchemeArg::Flat {
            return Ok(Balancer::Flat(rank_args.method(r)?));
        }
        let local = match rank_args.partitioner {
            PartitionerArg::Ace => LocalMethod::Ace,
            PartitionerArg::Sfc => LocalMethod::Sfc,
            PartitionerArg::Hier => bail!(
                "--scheme two-phase takes its groups from the machine tree; its local phase is ace or sfc, not hier"
            ),
        };
        let plan = match (RankArgs::plan(r)?, self.groups) {
            (Some(_), Some(_)) => {
                bail!(
                    "--groups is for runs without --machine (a machine's groups are its root's children)"
                )
            }
            (Some(p), None) => p,
            (None, g) => group_plan(r.ranks, g.unwrap_or(2))?,
        };
        let link = match self.link {
            Some(m) => LinkSource::Fixed(m),
            None => LinkSource::Measured {
                plan: Box::new(plan.clone()),
                probe: comm::LinkProbe::default(),
                every: self.link_every as usize,
            },
        };
        let clock = match self.model_clock {
            Some(seconds_per_work) => Clock::Model {
                seconds_per_work,
                delta: self.model_delta,
            },
            None => Clock::Measured,
        };
        let cfg = TwoPhaseConfig {
            groups: plan.rank_groups(1),
            capacities: r.capacities.clone(),
            local,
            block: self.grid.unwrap_or((n0 / 16).max(1)),
            policy: Policy {
                gamma: self.gamma,
                eff_min: self.eff_min,
                ..Policy::default()
            },
            link,
            clock,
        };
        Ok(Balancer::TwoPhase(Box::new(
            TwoPhase::new(cfg, n0).context("--scheme two-phase")?,
        )))
    }
}

/// A machine of `groups` equal nodes over `ranks` ranks (consecutive ranks per node, as
/// `part_api::block_range` deals them), for the two-phase scheme without --machine.
fn group_plan(ranks: usize, groups: usize) -> Result<Plan> {
    if groups == 0 || groups > ranks {
        bail!("--groups {groups}: between 1 and the {ranks} ranks");
    }
    let nodes: Vec<SwitchNode> = (0..groups)
        .map(|g| SwitchNode {
            ranks: ranks * (g + 1) / groups - ranks * g / groups,
            mflops: 1000.0,
        })
        .collect();
    switch_plan(&nodes, "HSFC").context("the groups' machine")
}

/// `--link ALPHA,BETA`: two finite numbers >= 0.
pub fn parse_link(s: &str) -> Result<LinkModel, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{s:?}: {e}"))?;
    match v[..] {
        [alpha, beta] if [alpha, beta].iter().all(|x| x.is_finite() && *x >= 0.0) => {
            Ok(LinkModel { alpha, beta })
        }
        _ => Err(format!(
            "{s:?}: expected ALPHA,BETA (seconds and seconds per byte, finite and >= 0)"
        )),
    }
}
