# The kernel variants only GPUs take (register-blocked GEMMs of every block shape, the K-split
# GEMM of few tiles, the implicit-GEMM conv, the radix sort, the bitonic sort's shared-memory
# passes) and the
# GPUs' choice between pre-recording a compiled program and recording it again at each call, run
# on this device by a child VM told it is a GPU (NXV_DEVICE_CLASS): on lavapipe the suite would
# otherwise never run them.
# test/gpu_class/variants.exs compares each result with the BinaryBackend's, bit for bit, and
# names the kernels that ran. The child polls for the GPU as GPU hosts do (NXV_SPIN_US, off on
# CPU devices otherwise), so the polling GPU thread and callers, and compiled programs submitted
# as soon as they are recorded, run here too.
defmodule Nx.Vulkan.GpuVariantsTest do
  use ExUnit.Case, async: true
  @moduletag :subprocess

  # The second run sorts long rows by the bitonic network (NXV_RADIX_SORT=0): a 70_000-element
  # row takes 26 dispatches that way, 12 by radix.
  for {block, radix, sort_dispatches, expected} <- [
        {"", nil, 12,
         ~w(gemm_tiled84_f32 gemm_tiled_tall_s32 gemm_conv_f32 gemm_f32 gemm_ksplit_f32 gemm_ksplit_s32)},
        {"128", "0", 26, ~w(gemm_tiled8_f32 gemm_tiled8_s32)}
      ] do
    test "GPU kernel variants, NXV_GEMM_BLOCK=#{inspect(block)}, NXV_RADIX_SORT=#{inspect(radix)}" do
      {output, status} =
        System.cmd(
          "mix",
          ["run", "--no-compile", "--no-deps-check", "test/gpu_class/variants.exs"],
          env: [
            {"MIX_ENV", "test"},
            {"NXV_DEVICE_CLASS", "discrete_large"},
            {"NXV_GEMM_BLOCK", unquote(block)},
            {"NXV_SPIN_US", "200"},
            {"NXV_RADIX_SORT", unquote(radix)}
          ],
          stderr_to_stdout: true
        )

      assert status == 0, output
      assert output =~ "variants: 0 mismatches (spin_us 200, submit_programs true)", output
      assert output =~ "argsort 70000 dispatches: #{unquote(sort_dispatches)}", output
      for kernel <- unquote(expected), do: assert(output =~ kernel, output)
    end
  end
end
