//! The pending queue. Op NIFs describe their work as a `Command` (a pipeline, its buffers, push
//! constants and group counts, or a buffer copy) and send it over a crossbeam channel to one GPU
//! thread, which records it at once into the open command buffer and returns nothing to wait for.
//!
//! Why a thread: vulkano's command-buffer builder is not `Send`, so one owner records everything
//! (no lock around the builder), and recording overlaps with the BEAM producing the next op.
//! Ops never see how a dispatch is recorded, so the recorder can change without touching them.
//!
//! The open command buffer is submitted (one submission, one fence wait) when a NIF asks for a
//! flush (download, `Nx.Vulkan.flush/0`, the host fallback) or when `batch_max` commands are pending
//! (`NXV_BATCH_MAX`; 0 or 1 submit every command on its own). vulkano's auto builder inserts the
//! barriers between dependent dispatches and keeps every buffer a command uses alive until the
//! command buffer is dropped, after its fence: a tensor garbage-collected while its work is pending
//! or in flight stays alive until that work is done.
use crate::context::ctx;
use crate::error::{Error, Result};
use crossbeam_channel::{bounded, unbounded, Sender};
use once_cell::sync::Lazy;
use smallvec::SmallVec;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vulkano::buffer::Subbuffer;
use vulkano::command_buffer::{
    AutoCommandBufferBuilder, CommandBufferUsage, CopyBufferInfo, PrimaryAutoCommandBuffer,
    PrimaryCommandBufferAbstract,
};
use vulkano::descriptor_set::WriteDescriptorSet;
use vulkano::pipeline::{ComputePipeline, Pipeline, PipelineBindPoint};
use vulkano::query::{QueryPool, QueryPoolCreateInfo, QueryResultFlags, QueryType};
use vulkano::sync::PipelineStage;
use vulkano::sync::GpuFuture;

pub const PUSH_WORDS: usize = 32;

/// One compute dispatch, described, not recorded.
pub struct Dispatch {
    pub pipeline: Arc<ComputePipeline>,
    /// Storage buffers in binding order (set 0, bindings 0..n).
    pub bindings: SmallVec<[Subbuffer<[u8]>; 4]>,
    pub push: [u32; PUSH_WORDS],
    pub groups: [u32; 3],
}

pub enum Command {
    Dispatch(Dispatch),
    Copy {
        src: Subbuffer<[u8]>,
        dst: Subbuffer<[u8]>,
        bytes: u64,
    },
}

#[derive(Clone, Copy, Debug)]
pub enum FlushReason {
    Download = 0,
    Explicit = 1,
    Fallback = 2,
    BatchCap = 3,
}
const FLUSH_REASONS: usize = 4;
pub const FLUSH_REASON_NAMES: [&str; FLUSH_REASONS] = ["download", "explicit", "fallback", "batch_cap"];

enum Message {
    Record(Command),
    Flush(FlushReason, Sender<Result<()>>),
}

pub static BATCH_MAX: AtomicUsize = AtomicUsize::new(64);
/// How long a fence is polled before blocking. Set from the device class: polling pays on GPUs,
/// but on a CPU device (lavapipe) it steals a core from the threads doing the work.
pub static FENCE_SPIN_US: AtomicU64 = AtomicU64::new(200);

pub struct Stats {
    pub recorded: AtomicU64,
    pub submissions: AtomicU64,
    pub flushes: [AtomicU64; FLUSH_REASONS],
    /// Nanoseconds the GPU thread spent recording, building + submitting, and waiting on fences.
    pub record_ns: AtomicU64,
    pub submit_ns: AtomicU64,
    pub wait_ns: AtomicU64,
    /// GPU time between the first and last command of each submission (timestamp queries), when
    /// GPU_TIMING is on.
    pub gpu_ns: AtomicU64,
}

pub static STATS: Stats = Stats {
    recorded: AtomicU64::new(0),
    submissions: AtomicU64::new(0),
    flushes: [const { AtomicU64::new(0) }; FLUSH_REASONS],
    record_ns: AtomicU64::new(0),
    submit_ns: AtomicU64::new(0),
    wait_ns: AtomicU64::new(0),
    gpu_ns: AtomicU64::new(0),
};

/// Whether each submission brackets its commands with timestamps (STATS.gpu_ns). Off by default:
/// reading the queries back costs a little per submission.
pub static GPU_TIMING: AtomicBool = AtomicBool::new(false);

static GPU_THREAD: Lazy<Sender<Message>> = Lazy::new(|| {
    let (tx, rx) = unbounded::<Message>();
    std::thread::Builder::new()
        .name("nx_vulkan_gpu".into())
        // Vulkan drivers (lavapipe especially) want more stack than a BEAM scheduler has.
        .stack_size(16 << 20)
        .spawn(move || {
            let mut batch = Batch::default();
            while let Ok(message) = rx.recv() {
                match message {
                    Message::Record(command) => {
                        batch.record(command);
                        if batch.count >= BATCH_MAX.load(Ordering::Relaxed).max(1) {
                            STATS.flushes[FlushReason::BatchCap as usize]
                                .fetch_add(1, Ordering::Relaxed);
                            batch.submit();
                        }
                    }
                    Message::Flush(reason, reply) => {
                        STATS.flushes[reason as usize].fetch_add(1, Ordering::Relaxed);
                        batch.submit();
                        let result = match batch.error.take() {
                            Some(e) => Err(e),
                            None => Ok(()),
                        };
                        let _ = reply.send(result);
                    }
                }
            }
        })
        .expect("spawning the nx_vulkan GPU thread");
    tx
});

/// Queues a command; returns at once.
pub fn record(command: Command) -> Result<()> {
    GPU_THREAD
        .send(Message::Record(command))
        .map_err(|_| Error::Vulkan("the GPU thread has stopped".into()))
}

/// Submits everything pending and waits for it; returns the first error recorded since the last flush.
pub fn flush(reason: FlushReason) -> Result<()> {
    let (tx, rx) = bounded(1);
    GPU_THREAD
        .send(Message::Flush(reason, tx))
        .map_err(|_| Error::Vulkan("the GPU thread has stopped".into()))?;
    rx.recv()
        .map_err(|_| Error::Vulkan("the GPU thread has stopped".into()))?
}

#[derive(Default)]
struct Batch {
    builder: Option<AutoCommandBufferBuilder<PrimaryAutoCommandBuffer>>,
    count: usize,
    /// The first failure since the last flush, reported by that flush.
    error: Option<Error>,
    /// Two timestamp queries, reused by every submission (each is waited on before the next).
    timestamps: Option<Arc<QueryPool>>,
    /// Whether the open command buffer started with a timestamp.
    timed: bool,
}

impl Batch {
    fn record(&mut self, command: Command) {
        let started = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| self.try_record(command)))
            .unwrap_or_else(|_| Err(Error::Vulkan("recording a command panicked".into())));
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
        STATS.recorded.fetch_add(1, Ordering::Relaxed);
        STATS
            .record_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn try_record(&mut self, command: Command) -> Result<()> {
        let c = ctx()?;
        if self.builder.is_none() {
            let mut builder = AutoCommandBufferBuilder::primary(
                c.command_buffers.clone(),
                c.queue.queue_family_index(),
                CommandBufferUsage::OneTimeSubmit,
            )
            .map_err(|e| Error::vulkan("starting a command buffer", e))?;
            self.timed = false;
            if GPU_TIMING.load(Ordering::Relaxed) {
                if self.timestamps.is_none() {
                    self.timestamps = Some(
                        QueryPool::new(
                            c.device.clone(),
                            QueryPoolCreateInfo {
                                query_count: 2,
                                ..QueryPoolCreateInfo::query_type(QueryType::Timestamp)
                            },
                        )
                        .map_err(|e| Error::vulkan("creating timestamp queries", e))?,
                    );
                }
                let pool = self.timestamps.clone().unwrap();
                unsafe {
                    builder
                        .reset_query_pool(pool.clone(), 0..2)
                        .and_then(|b| b.write_timestamp(pool, 0, PipelineStage::TopOfPipe))
                        .map_err(|e| Error::vulkan("recording a timestamp", e))?;
                }
                self.timed = true;
            }
            self.builder = Some(builder);
        }
        let builder = self.builder.as_mut().unwrap();
        self.count += 1;
        match command {
            Command::Copy { src, dst, bytes } => {
                builder
                    .copy_buffer(CopyBufferInfo::buffers(
                        src.slice(..bytes),
                        dst.slice(..bytes),
                    ))
                    .map_err(|e| Error::vulkan("recording a copy", e))?;
            }
            Command::Dispatch(d) => {
                let layout = d.pipeline.layout().clone();
                let writes: SmallVec<[WriteDescriptorSet; 8]> = d
                    .bindings
                    .into_iter()
                    .enumerate()
                    .map(|(i, b)| WriteDescriptorSet::buffer(i as u32, b))
                    .collect();
                builder
                    .bind_pipeline_compute(d.pipeline.clone())
                    .and_then(|b| b.push_descriptor_set(PipelineBindPoint::Compute, layout.clone(), 0, writes))
                    .and_then(|b| b.push_constants(layout, 0, d.push))
                    .map_err(|e| Error::vulkan("recording a dispatch", e))?;
                unsafe { builder.dispatch(d.groups) }
                    .map_err(|e| Error::vulkan("recording a dispatch", e))?;
            }
        }
        Ok(())
    }

    /// Submits the open command buffer (if any) and waits on its fence: spin briefly first, as a
    /// blocking wait costs ~25 us more than polling for small batches on real GPUs.
    fn submit(&mut self) {
        let Some(mut builder) = self.builder.take() else { return };
        self.count = 0;
        let timestamps = if self.timed { self.timestamps.clone() } else { None };
        let result = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
            let c = ctx()?;
            let started = Instant::now();
            if let Some(pool) = &timestamps {
                unsafe { builder.write_timestamp(pool.clone(), 1, PipelineStage::BottomOfPipe) }
                    .map_err(|e| Error::vulkan("recording a timestamp", e))?;
            }
            let command_buffer = builder
                .build()
                .map_err(|e| Error::vulkan("building a command buffer", e))?;
            let future = command_buffer
                .execute(c.queue.clone())
                .map_err(|e| Error::vulkan("submitting a command buffer", e))?
                .then_signal_fence_and_flush()
                .map_err(|e| Error::vulkan("submitting a command buffer", e))?;
            STATS.submissions.fetch_add(1, Ordering::Relaxed);
            let submitted = Instant::now();
            STATS
                .submit_ns
                .fetch_add((submitted - started).as_nanos() as u64, Ordering::Relaxed);
            let spin_until = submitted + Duration::from_micros(FENCE_SPIN_US.load(Ordering::Relaxed));
            loop {
                if future
                    .is_signaled()
                    .map_err(|e| Error::vulkan("waiting on a fence", e))?
                {
                    break;
                }
                if Instant::now() > spin_until {
                    future
                        .wait(None)
                        .map_err(|e| Error::vulkan("waiting on a fence", e))?;
                    break;
                }
                std::hint::spin_loop();
            }
            STATS
                .wait_ns
                .fetch_add(submitted.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if let Some(pool) = &timestamps {
                let mut ticks = [0u64; 2];
                pool.get_results(0..2, &mut ticks, QueryResultFlags::WAIT)
                    .map_err(|e| Error::vulkan("reading timestamps", e))?;
                let ns = ticks[1].saturating_sub(ticks[0]) as f64 * c.info.timestamp_period as f64;
                STATS.gpu_ns.fetch_add(ns as u64, Ordering::Relaxed);
            }
            Ok(())
        }))
        .unwrap_or_else(|_| Err(Error::Vulkan("submitting a command buffer panicked".into())));
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }
}
