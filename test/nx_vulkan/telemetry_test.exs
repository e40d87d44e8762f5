defmodule Nx.Vulkan.TelemetryTest do
  # Not async: the out-of-memory case sets a small budget for the whole VM.
  use ExUnit.Case, async: false

  @events [
    [:nx_vulkan, :submit],
    [:nx_vulkan, :flush],
    [:nx_vulkan, :pipeline, :create],
    [:nx_vulkan, :fallback],
    [:nx_vulkan, :out_of_memory]
  ]

  setup do
    test = self()
    id = {__MODULE__, make_ref()}

    :telemetry.attach_many(id, @events, &__MODULE__.forward/4, test)

    on_exit(fn -> :telemetry.detach(id) end)
  end

  def forward(event, measurements, metadata, test),
    do: send(test, {:event, event, measurements, metadata})

  test "submissions and flushes report their reason, commands and time" do
    x = Nx.iota({1000}, type: :f32)
    Nx.Vulkan.flush()
    assert Nx.to_number(Nx.sum(Nx.exp(Nx.divide(x, 1000)))) > 1000
    # The read's flush (other tests' reads may report theirs too).
    assert_receive {:event, [:nx_vulkan, :flush], %{commands: commands, duration_us: us},
                    %{reason: :download}},
                   5000

    assert is_integer(commands) and commands >= 0 and is_integer(us)

    # The read's submission, or (NXV_SUBMIT_IDLE) one that sent its first commands to the idle
    # GPU on their own.
    assert_receive {:event, [:nx_vulkan, :submit], %{commands: n, duration_us: _},
                    %{reason: reason}}
                   when reason in [:download, :batch_cap, :idle],
                   5000

    assert n >= 1
    Nx.Vulkan.flush()
    assert_receive {:event, [:nx_vulkan, :flush], %{}, %{reason: :explicit}}, 5000
  end

  test "a host fallback reports the op and why" do
    t = Nx.tensor([1, 2, 3])
    Nx.reduce(t, 0, fn x, acc -> Nx.add(Nx.to_number(x), acc) |> Nx.as_type(x.type) end)
    assert_receive {:event, [:nx_vulkan, :fallback], %{count: 1}, %{op: :reduce, reason: reason}}
    assert is_binary(reason)
  end

  test "an out-of-memory error is reported before it raises" do
    s = Nx.Vulkan.stats()
    on_exit(fn -> Nx.Vulkan.set_memory_limit(s.memory_limit) end)
    # Cached programs would be freed by the failing allocation, passing the budget set here
    # (a dropped program's memory returns once the processes that looked it up collect).
    Nx.Vulkan.ProgramCache.clear()
    Enum.each(Process.list(), &:erlang.garbage_collect/1)
    Nx.Vulkan.Native.reclaim()
    Nx.Vulkan.set_memory_limit(Nx.Vulkan.stats().allocated_bytes + 1024 * 1024)

    assert_raise Nx.Vulkan.Error, ~r/out of device memory/, fn ->
      Nx.iota({1024 * 1024}, type: :f32)
    end

    assert_receive {:event, [:nx_vulkan, :out_of_memory], %{requested_bytes: 4_194_304},
                    %{nif: :iota, message: "out of device memory: " <> _}}
  end
end
