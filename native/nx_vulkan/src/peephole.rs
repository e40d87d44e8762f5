//! Rewrites of a captured program's commands (capture.rs) that keep every result bit for bit.
//!
//! A GEMM whose result only a transposing copy reads becomes the GEMM of the swapped, transposed
//! operands writing the copy's destination: (A B)^T = B^T A^T, with the operands read through
//! strides and each output the same products summed in the same order (k = 0, 1, ...), so the
//! values are identical and one dispatch and one dependency level go. Nx's gradient of dot
//! transposes its dot's result, so a training step has several of these.
use crate::ops::matmul::{gemm_family, gemm_grid};
use crate::queue::{handle, Command, Dispatch};
use smallvec::SmallVec;
use crate::shaders::Family;
use std::collections::{HashMap, HashSet};

/// Whether `copy` (a strided copy, copy.comp's push layout) writes the whole M x N row-major
/// matrix it reads from offset 0 transposed into a contiguous N x M one at offset 0.
fn is_transpose(copy: &Dispatch, m: u32, n: u32) -> bool {
    let p = &copy.push;
    copy.name.starts_with("copy_b")
        && copy.bindings().len() == 2
        && u64::from(p[0]) == u64::from(m) * u64::from(n)
        && p[1] == 2
        && p[2] == 0
        && p[3] == 0
        && p[4..6] == [n, m]
        && p[12..14] == [1, n]
        && p[20..22] == [m, 1]
}

/// Bytes of the element a kernel's dtype suffix names.
fn suffix_bytes(name: &str) -> Option<u32> {
    match name.rsplit_once('_')?.1.trim_end_matches('p') {
        "f64" | "s64" | "u64" | "b8" => Some(8),
        "f32" | "s32" | "u32" | "b4" => Some(4),
        "f16" | "s16" | "u16" | "b2" => Some(2),
        "s8" | "u8" | "b1" => Some(1),
        _ => None,
    }
}

/// Folds transposing copies into the GEMMs they read (see the module doc). `escapes` are the
/// buffers read outside the program. Returns the commands and how many copies went.
pub fn fold_transposed_gemms(commands: Vec<Command>, escapes: &HashSet<u64>) -> (Vec<Command>, usize) {
    if *crate::fuse::FUSE_OFF {
        return (commands, 0);
    }
    let mut readers: HashMap<u64, usize> = HashMap::new();
    for command in &commands {
        for r in command.accesses().0 {
            *readers.entry(r).or_default() += 1;
        }
    }
    let mut commands: Vec<Option<Command>> = commands.into_iter().map(Some).collect();
    let mut folded = 0;
    for i in 0..commands.len() {
        let Some(Command::Dispatch(gemm)) = &commands[i] else { continue };
        let Some(family) = gemm_family(gemm.name) else { continue };
        let (m, n, p) = (gemm.push[0], gemm.push[1], gemm.push);
        if gemm.bindings().len() != 3 || p[3] != 1 {
            continue;
        }
        let out = handle(&gemm.bindings()[2]);
        if escapes.contains(&out) || readers.get(&out) != Some(&1) {
            continue;
        }
        // The one reader: a transpose of the whole result, with nothing in between touching
        // its destination (the GEMM now writes it earlier).
        let Some(j) =
            (i + 1..commands.len()).find(|&j| commands[j].as_ref().is_some_and(|c| c.accesses().0.contains(&out)))
        else {
            continue;
        };
        let Some(Command::Dispatch(copy)) = &commands[j] else { continue };
        if !is_transpose(copy, m, n)
            || handle(&copy.bindings()[0]) != out
            || suffix_bytes(copy.name) != suffix_bytes(gemm.name)
        {
            continue;
        }
        let dst = copy.bindings()[1].clone();
        let dst_handle = handle(&dst);
        let touched = (i + 1..j).any(|k| {
            commands[k].as_ref().is_some_and(|c| {
                let (reads, writes) = c.accesses();
                reads.contains(&dst_handle) || writes.contains(&dst_handle)
            })
        });
        if touched {
            continue;
        }
        // C^T = B^T A^T: M' = N, N' = M; A' = B read as [batch][n][k], B' = A as [batch][k][m].
        let mut push = p;
        push[0] = n;
        push[1] = m;
        push[4] = p[8];
        push[5..8].copy_from_slice(&[p[9], p[11], p[10]]);
        push[8] = p[4];
        push[9..12].copy_from_slice(&[p[5], p[7], p[6]]);
        let Some(Ok(groups)) = gemm_grid(family, 1, u64::from(n), u64::from(m)) else { continue };
        // gemm_rows4.comp's layout bits say which way each operand's vectors run: A's become
        // B's (ops/matmul.rs, rows4_layout).
        let pipeline = if family == Family::GemmRows4 {
            let op = gemm.pipeline.op();
            match gemm.pipeline.with_op(((op & 1) << 1) | ((op >> 1) & 1)) {
                Ok(p) => p,
                Err(_) => continue,
            }
        } else {
            gemm.pipeline
        };
        let mut bindings: SmallVec<[_; 4]> = gemm.bindings().iter().cloned().collect();
        bindings.swap(0, 1);
        bindings[2] = dst;
        let rewritten = Dispatch::new(gemm.name, pipeline, bindings, push, groups, gemm.writes);
        commands[i] = Some(Command::Dispatch(rewritten));
        commands[j] = None;
        folded += 1;
    }
    (commands.into_iter().flatten().collect(), folded)
}
