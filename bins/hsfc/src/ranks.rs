//! The group of processes `hsfc partition` runs on: this process alone ([`Serial`]), or the
//! ranks of an MPI job (feature `mpi`). The partition code is written once against [`Ranks`].

use anyhow::Result;
use part_api::{Reduce, Serial};
use std::borrow::Cow;

/// A group of ranks that partition one point file together.
pub(crate) trait Ranks: Reduce {
    /// Whether the run was launched as a group (the output then names the rank count), as
    /// opposed to the plain serial command.
    fn distributed(&self) -> bool;

    /// Every rank's parts concatenated in rank order, on rank 0 (`None` on the others).
    fn gather_parts<'a>(&self, mine: &'a [u32]) -> Result<Option<Cow<'a, [u32]>>>;
}

impl Ranks for Serial {
    fn distributed(&self) -> bool {
        false
    }

    fn gather_parts<'a>(&self, mine: &'a [u32]) -> Result<Option<Cow<'a, [u32]>>> {
        Ok(Some(Cow::Borrowed(mine)))
    }
}

/// `gatherv` to rank 0 through a `comm` communicator.
#[cfg(any(feature = "mpi", test))]
fn gather_on_0<C: comm::Comm>(c: &C, mine: &[u32]) -> Result<Option<Cow<'static, [u32]>>> {
    Ok(c.gatherv(0, mine)?.map(|all| Cow::Owned(all.into_data())))
}

#[cfg(feature = "mpi")]
impl Ranks for comm::MpiComm {
    fn distributed(&self) -> bool {
        true
    }

    fn gather_parts<'a>(&self, mine: &'a [u32]) -> Result<Option<Cow<'a, [u32]>>> {
        gather_on_0(self, mine)
    }
}

/// Thread ranks: the tests run the distributed code path without MPI.
#[cfg(test)]
impl Ranks for comm::ThreadComm {
    fn distributed(&self) -> bool {
        true
    }

    fn gather_parts<'a>(&self, mine: &'a [u32]) -> Result<Option<Cow<'a, [u32]>>> {
        gather_on_0(self, mine)
    }
}
