//! What the integration tests share.

use comm::Comm;
use hier_part::{Bisection, Error, Method, Par, Partitioner, Points, Rcb, Rib};

/// RCB or RIB on any group: `Serial` for the serial run, a thread rank for the distributed one
/// (the same entry point).
pub fn bisect<C: Comm>(
    group: &C,
    (method, keep_ties, par): (Method, bool, Par),
    points: Points<'_>,
    targets: &[f64],
    parts: &mut [u32],
) -> Result<Bisection, Error> {
    match method {
        Method::Rcb => Rcb { keep_ties, par }.partition(group, points, targets, parts),
        Method::Rib => Rib { keep_ties, par }.partition(group, points, targets, parts),
    }
}
