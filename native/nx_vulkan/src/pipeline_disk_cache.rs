//! The on-disk VkPipelineCache, so a second VM start compiles no pipeline the first one compiled.
//!
//! One file per device and driver: `pipelines-<vendor>-<device>-<driver version>-<cache UUID>.bin`
//! in `NXV_PIPELINE_CACHE` (a directory; `off` disables the cache), else
//! `$XDG_CACHE_HOME/nx_vulkan`, else `~/.cache/nx_vulkan`. The file starts with our own header
//! (the same identifiers, the data's length and a hash of it), checked before the driver sees the
//! data: drivers must reject foreign data themselves, but a truncated or corrupt file is not
//! something to trust a driver with. A file that fails the check is ignored (and overwritten at
//! the next save), never an error. Saved by the builder threads after each burst of creations and
//! by `save_pipeline_cache/0` at application stop; written to a temporary file and renamed, so a
//! reader never sees half a file. Each device (context.rs) has its own VkPipelineCache, loaded
//! from the same file (devices of one model share a file); each saves what it has, so the file
//! holds the cache of the device that saved last.
use crate::context::{ctx_at, default_index, MAX_DEVICES};
use crate::error::{Error, Result};
use once_cell::sync::OnceCell;
use std::hash::Hasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use vulkano::pipeline::cache::{PipelineCache, PipelineCacheCreateInfo};

const MAGIC: &[u8; 8] = b"NXVPC001";
/// Magic, vendor, device, driver version, cache UUID, data length, data hash.
const HEADER: usize = 8 + 4 + 4 + 4 + 16 + 8 + 8;

/// What happened to the file at start, for `Nx.Vulkan.stats/0` (`pipeline_disk_cache`).
#[derive(Clone, Debug)]
pub enum Loaded {
    Off,
    /// No file yet (or it could not be read).
    Missing,
    Loaded(u64),
    /// The file failed the header check (why).
    Ignored(String),
}

struct DiskCache {
    cache: Arc<PipelineCache>,
    path: Option<PathBuf>,
    header: [u8; 36],
    loaded: Loaded,
}

static DISK_CACHES: [OnceCell<Option<DiskCache>>; MAX_DEVICES] = [const { OnceCell::new() }; MAX_DEVICES];
/// Per device: pipelines were created since its last save.
static DIRTY: [AtomicBool; MAX_DEVICES] = [const { AtomicBool::new(false) }; MAX_DEVICES];
/// Saves one at a time (a builder thread and the stop hook may both save).
static SAVING: Mutex<()> = Mutex::new(());

fn disk_cache(device: usize) -> Option<&'static DiskCache> {
    DISK_CACHES.get(device)?.get_or_init(|| open(device).ok()).as_ref()
}

/// The VkPipelineCache every pipeline of `device` is created through (None if even an empty one
/// could not be created: pipelines are then created without one).
pub fn cache(device: usize) -> Option<Arc<PipelineCache>> {
    disk_cache(device).map(|d| d.cache.clone())
}

pub fn mark_dirty(device: usize) {
    DIRTY[device].store(true, Ordering::Release);
}

/// The cache directory (also where fuse.rs keeps the SPIR-V of fused kernels).
pub fn directory() -> Option<PathBuf> {
    match std::env::var("NXV_PIPELINE_CACHE") {
        Ok(dir) if dir.trim() == "off" => None,
        Ok(dir) if !dir.trim().is_empty() => Some(PathBuf::from(dir.trim())),
        _ => std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("nx_vulkan")),
    }
}

pub fn hash(data: &[u8]) -> u64 {
    // SipHash with fixed keys: a file written by another build may hash differently, and is then
    // ignored like any other mismatch.
    let mut h = std::hash::DefaultHasher::new();
    h.write(data);
    h.finish()
}

fn open(device: usize) -> Result<DiskCache> {
    let c = ctx_at(device)?;
    let props = c.device.physical_device().properties();
    let mut header = [0u8; 36];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&props.vendor_id.to_le_bytes());
    header[12..16].copy_from_slice(&props.device_id.to_le_bytes());
    header[16..20].copy_from_slice(&props.driver_version.to_le_bytes());
    header[20..36].copy_from_slice(&props.pipeline_cache_uuid);
    let path = directory().map(|dir| {
        let uuid: String = props.pipeline_cache_uuid.iter().map(|b| format!("{b:02x}")).collect();
        dir.join(format!(
            "pipelines-{:04x}-{:04x}-{:x}-{uuid}.bin",
            props.vendor_id, props.device_id, props.driver_version
        ))
    });
    let (initial_data, loaded) = match &path {
        None => (Vec::new(), Loaded::Off),
        Some(path) => match std::fs::read(path) {
            Err(_) => (Vec::new(), Loaded::Missing),
            Ok(file) => match check(&file, &header) {
                Ok(data) => (data.to_vec(), Loaded::Loaded(data.len() as u64)),
                Err(why) => (Vec::new(), Loaded::Ignored(why)),
            },
        },
    };
    let create = |initial_data: Vec<u8>| unsafe {
        // Safety: the data passed our header check (device, driver, length and hash), so it is
        // what this driver's vkGetPipelineCacheData gave us.
        PipelineCache::new(
            c.device.clone(),
            PipelineCacheCreateInfo {
                initial_data,
                ..Default::default()
            },
        )
    };
    let (cache, loaded) = match create(initial_data) {
        Ok(cache) => (cache, loaded),
        Err(e) => (
            create(Vec::new()).map_err(|e| Error::vulkan("creating a pipeline cache", e))?,
            Loaded::Ignored(format!("the driver refused its data ({e})")),
        ),
    };
    Ok(DiskCache {
        cache,
        path,
        header,
        loaded,
    })
}

/// The data after a header that matches ours, or why the file is ignored.
fn check<'a>(file: &'a [u8], header: &[u8; 36]) -> std::result::Result<&'a [u8], String> {
    if file.len() < HEADER || &file[..8] != MAGIC {
        return Err("not an nx_vulkan pipeline cache".into());
    }
    if &file[..36] != header {
        return Err("written for another device or driver".into());
    }
    let len = u64::from_le_bytes(file[36..44].try_into().unwrap());
    let data = &file[HEADER..];
    if data.len() as u64 != len {
        return Err(format!("truncated: {} of {len} bytes", data.len()));
    }
    if u64::from_le_bytes(file[44..52].try_into().unwrap()) != hash(data) {
        return Err("its data does not match its hash".into());
    }
    Ok(data)
}

/// Writes each device's cache if pipelines were created on it since its last save.
pub fn save_if_dirty() {
    for device in 0..MAX_DEVICES {
        if DIRTY[device].swap(false, Ordering::AcqRel) && save(device).is_err() {
            // Try again after the next creation.
            DIRTY[device].store(true, Ordering::Release);
        }
    }
}

fn save(device: usize) -> Result<()> {
    let Some(disk) = DISK_CACHES[device].get().and_then(Option::as_ref) else { return Ok(()) };
    let Some(path) = &disk.path else { return Ok(()) };
    let _one_at_a_time = SAVING.lock().map_err(|_| Error::Vulkan("the pipeline cache lock was poisoned".into()))?;
    let data = disk
        .cache
        .get_data()
        .map_err(|e| Error::vulkan("reading the pipeline cache", e))?;
    let mut file = Vec::with_capacity(HEADER + data.len());
    file.extend_from_slice(&disk.header);
    file.extend_from_slice(&(data.len() as u64).to_le_bytes());
    file.extend_from_slice(&hash(&data).to_le_bytes());
    file.extend_from_slice(&data);
    let io = |e: std::io::Error| Error::Vulkan(format!("writing the pipeline cache {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &file).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Saves now (application stop); waits for nothing but the write.
#[rustler::nif(schedule = "DirtyIo")]
fn save_pipeline_cache() -> Result<rustler::Atom> {
    for device in 0..MAX_DEVICES {
        if DIRTY[device].swap(false, Ordering::AcqRel) {
            save(device)?;
        }
    }
    Ok(rustler::types::atom::ok())
}

/// (path, what happened at load) for stats: the default device's.
pub fn info() -> (Option<String>, Loaded) {
    // Not opened yet (no pipeline created so far).
    let Some(opened) = default_index().ok().and_then(|d| DISK_CACHES[d].get()) else { return (None, Loaded::Missing) };
    match opened {
        None => (None, Loaded::Off),
        Some(d) => (d.path.as_ref().map(|p| p.display().to_string()), d.loaded.clone()),
    }
}
