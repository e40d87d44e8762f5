# Several devices and several nodes, each in a child VM running an ExUnit suite of its own:
#
#   * test/multi_device/devices.exs with NXV_LOGICAL_DEVICES=3 (three logical devices on this
#     machine's one Vulkan device, each with its own context, queue, GPU thread, pool and
#     pipelines): placement, mixed-device errors, constants following an op's device, transfers,
#     per-device stats, parallel use, the compiler's :device and partitions, Nx.Serving with one
#     partition per device;
#   * test/multi_device/nodes.exs: a distributed node (loopback) and a :peer node with two logical
#     devices: tensors read across nodes through their owner, a clear error once the owner freed
#     one, and a serving on the peer answering batched_run calls from the first node.
defmodule Nx.Vulkan.MultiDeviceProcessTest do
  # Not async: the child VMs compile every kernel once per logical device, which on a 2-core
  # machine starved the async tests running beside them past their 60 s timeout.
  use ExUnit.Case, async: false
  @moduletag :subprocess
  @moduletag timeout: 600_000

  defp run_suite(script, env) do
    System.cmd("mix", ["run", "--no-compile", "--no-deps-check", script],
      env: [{"MIX_ENV", "test"} | env],
      stderr_to_stdout: true
    )
  end

  test "three logical devices: the multi-device suite passes in a child VM" do
    {output, status} = run_suite("test/multi_device/devices.exs", [{"NXV_LOGICAL_DEVICES", "3"}])
    assert status == 0, output
    assert output =~ ~r/\n8 tests, 0 failures/, output
  end

  test "two nodes: tensors cross between them and a serving on one answers the other" do
    {output, status} = run_suite("test/multi_device/nodes.exs", [])
    assert status == 0, output
    assert output =~ ~r/\n2 tests, 0 failures/, output
  end
end
