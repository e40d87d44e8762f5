defmodule Nx.Vulkan.LavapipeThreadsTest do
  # Lavapipe's worker pool costs a tiny dispatch a hand-off to other threads; on hosts with at
  # most two logical CPUs the application starts it without one (LP_NUM_THREADS=0) unless the
  # user set LP_NUM_THREADS (Nx.Vulkan.Application, README's configuration table).
  use ExUnit.Case, async: true
  @moduletag :subprocess

  alias Nx.Vulkan.Application, as: App

  test "the decision: at most two CPUs drop the pool, a user's setting wins, more CPUs keep it" do
    assert App.lavapipe_threads(1, nil) == {:set, "0"}
    assert App.lavapipe_threads(2, "") == {:set, "0"}
    assert App.lavapipe_threads(3, nil) == :driver_default
    assert App.lavapipe_threads(64, nil) == :driver_default
    assert App.lavapipe_threads(:unknown, nil) == :driver_default
    assert App.lavapipe_threads(2, "2") == {:user, "2"}
    assert App.lavapipe_threads(16, "0") == {:user, "0"}
  end

  test "it can be set only before the instance exists" do
    Nx.Vulkan.Device.info()

    assert {:error,
            {:argument, "LP_NUM_THREADS can be set only before the Vulkan instance is created"}} =
             Nx.Vulkan.Native.set_lavapipe_threads("0")
  end

  # What a VM started by mix decides and whether lavapipe then runs a worker pool (its threads
  # are named llvmpipe-N), pinned to one CPU or left to the host's.
  defp child(env, pin?) do
    script = """
    Nx.iota({4}, backend: Nx.Vulkan.Backend) |> Nx.add(1) |> Nx.to_binary()
    # Threads come and go while the list is read (a task listed may be gone before its name is).
    pool = for t <- File.ls!("/proc/self/task"), match?({:ok, "llvmpipe-" <> _}, File.read("/proc/self/task/\#{t}/comm")), do: t
    IO.puts("RESULT " <> inspect({Nx.Vulkan.Device.lavapipe_threads(), Nx.Vulkan.Device.info().type, length(pool)}))
    """

    {cmd, args} =
      if pin?,
        do: {"taskset", ["-c", "0", "mix", "run", "--no-compile", "--no-deps-check", "-e", script]},
        else: {"mix", ["run", "--no-compile", "--no-deps-check", "-e", script]}

    {output, 0} = System.cmd(cmd, args, env: [{"MIX_ENV", "test"} | env], stderr_to_stdout: true)
    [_, result] = Regex.run(~r/RESULT (.*)/, output)
    {value, []} = Code.eval_string(result)
    value
  end

  test "a VM on one CPU starts lavapipe without its pool; LP_NUM_THREADS set by the user is kept" do
    if System.find_executable("taskset") do
      {decision, type, pool} = child([{"LP_NUM_THREADS", nil}], true)
      assert decision == {:set, "0"}
      if type == :cpu, do: assert(pool == 0)
    end

    {decision, type, pool} = child([{"LP_NUM_THREADS", "2"}], false)
    assert decision == {:user, "2"}
    if type == :cpu, do: assert(pool > 0)
  end
end
