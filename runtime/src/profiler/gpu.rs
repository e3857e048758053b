//! GPU time of profiled ops: a CUDA timing event on the op's device stream
//! where the op starts and where it ends, read when the profiler stops
//! (what `torch.profiler` gets from CUPTI, at op rather than kernel grain).

#[cfg(any(feature = "cuda", feature = "cuda12"))]
mod imp {
    use crate::Device;
    use crate::trace::Inputs;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use tapir_kernels::cuda::TimingMark;

    /// An op's start mark on its device.
    pub(crate) struct Started(TimingMark, usize);

    /// An op's two marks, read at the end.
    pub(crate) struct Pending {
        start: TimingMark,
        end: TimingMark,
        ordinal: usize,
    }

    /// Per device: a first mark and the wall time (µs from the profiler's
    /// start) it was recorded at, to place GPU intervals on the timeline.
    #[derive(Default)]
    pub(crate) struct Bases(Mutex<HashMap<usize, (TimingMark, f64)>>);

    fn cuda_ordinal(inputs: &dyn Inputs) -> Option<usize> {
        let mut found = None;
        inputs.each(&mut |t| {
            if let (None, Some(Device::Cuda(i))) = (found, t.map(|t| t.device())) {
                found = Some(i);
            }
        });
        found
    }

    pub(crate) fn begin(inputs: &dyn Inputs, bases: &Bases, now_us: f64) -> Option<Started> {
        let ordinal = cuda_ordinal(inputs)?;
        let dev = crate::storage::cuda::device(ordinal).ok()?;
        let mut b = bases.0.lock().unwrap_or_else(|e| e.into_inner());
        if let std::collections::hash_map::Entry::Vacant(v) = b.entry(ordinal) {
            v.insert((dev.timing_mark().ok()?, now_us));
        }
        Some(Started(dev.timing_mark().ok()?, ordinal))
    }

    pub(crate) fn end(s: Started) -> Option<Pending> {
        let dev = crate::storage::cuda::device(s.1).ok()?;
        Some(Pending {
            start: s.0,
            end: dev.timing_mark().ok()?,
            ordinal: s.1,
        })
    }

    /// (start on the timeline, duration, device), in µs.
    pub(crate) fn resolve(p: &Pending, bases: &Bases) -> Option<(f64, f64, usize)> {
        let b = bases.0.lock().unwrap_or_else(|e| e.into_inner());
        let (base, base_us) = b.get(&p.ordinal)?;
        let offset = base.elapsed_ms(&p.start).ok()? as f64 * 1e3;
        let dur = p.start.elapsed_ms(&p.end).ok()? as f64 * 1e3;
        Some((base_us + offset, dur, p.ordinal))
    }
}

#[cfg(not(any(feature = "cuda", feature = "cuda12")))]
mod imp {
    use crate::trace::Inputs;

    /// Without CUDA there is no GPU side to time.
    pub(crate) enum Started {}
    pub(crate) enum Pending {}
    #[derive(Default)]
    pub(crate) struct Bases {
        _none: (),
    }

    pub(crate) fn begin(_: &dyn Inputs, _: &Bases, _: f64) -> Option<Started> {
        None
    }
    pub(crate) fn end(s: Started) -> Option<Pending> {
        match s {}
    }
    pub(crate) fn resolve(p: &Pending, _: &Bases) -> Option<(f64, f64, usize)> {
        match *p {}
    }
}

pub(crate) use imp::*;
