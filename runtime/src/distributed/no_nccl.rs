//! Stand-in for the NCCL engine in a build without the `cuda` feature:
//! preparing it is an error, so nothing else here can be reached
//! (`NcclEngine` has no values).

use super::ReduceOp;
use crate::device::Device;
use crate::{Error, Result, Tensor};

/// Never made: there is no GPU support in this build.
pub(super) enum Prepared {}

/// Never made: there is no GPU support in this build.
pub(super) enum NcclEngine {}

/// Never made: there is no GPU support in this build.
pub(super) enum Landing {}

impl Landing {
    pub fn land(self) -> Result<()> {
        match self {}
    }
}

pub(super) fn prepare(_local_rank: usize) -> Result<Prepared> {
    Err(Error::Distributed(
        "init_process_group: the NCCL backend needs tapir built with `--features cuda` (and a GPU); use \
         Backend::Mpi for CPU processes"
            .into(),
    ))
}

pub(super) fn unique_id() -> Result<[u8; 128]> {
    unreachable!("NCCL is never prepared without the cuda feature")
}

impl Prepared {
    pub fn join(self, _rank: usize, _world: usize, _id: [u8; 128]) -> Result<NcclEngine> {
        match self {}
    }
}

impl NcclEngine {
    pub fn device(&self) -> Device {
        match *self {}
    }

    pub fn all_reduce(&self, _: &str, _: &Tensor, _: ReduceOp) -> Result<Landing> {
        match *self {}
    }

    pub fn broadcast(&self, _: &str, _: &Tensor, _: usize) -> Result<Landing> {
        match *self {}
    }

    pub fn all_gather(&self, _: &str, _: &Tensor, _: usize) -> Result<(Tensor, Landing)> {
        match *self {}
    }

    pub fn reduce_scatter(
        &self,
        _: &str,
        _: &Tensor,
        _: usize,
        _: ReduceOp,
    ) -> Result<(Tensor, Landing)> {
        match *self {}
    }
}
