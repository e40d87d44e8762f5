# Run by test/nx_vulkan/multi_device_test.exs in a child VM: this VM becomes a distributed node
# (loopback only) and starts a second node (:peer) with two logical devices
# (NXV_LOGICAL_DEVICES=2). Tensors cross between the two, and a serving on the peer answers
# batched_run calls made here. An ExUnit suite of its own; the parent checks its summary line.
# Also runs as a plain `elixir` script with the apps on ERL_LIBS (the H200 host has no Mix).
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
ExUnit.start(autorun: false, seed: 0, timeout: 240_000)

# What the peer runs, loaded there as object code (a script's modules exist only here).
{:module, _, binary, _} =
  defmodule Nx.Vulkan.PeerHelpers do
    # A process on the peer that holds a device tensor until told to drop it.
    def hold(data) do
      parent = self()

      pid =
        spawn(fn ->
          t = Nx.tensor(data, backend: {Nx.Vulkan.Backend, device: 1})
          send(parent, {:held, t})

          receive do
            :drop -> :ok
          end
        end)

      receive do
        {:held, t} -> {pid, t}
      end
    end

    # A program run on the peer with an argument of another node; the result goes back as a
    # host tensor.
    def double_compiled(t) do
      Nx.Defn.jit(&Nx.multiply(&1, 2), compiler: Nx.Vulkan).(t)
      |> Nx.backend_transfer(Nx.BinaryBackend)
    end

    def model(x), do: x |> Nx.multiply(3.0) |> Nx.sin() |> Nx.sum(axes: [1])

    # A serving of `model`, one partition per device, started by a process that stays; its
    # results go back as host tensors (a device tensor is freed on the peer once sent).
    def start_serving(name) do
      parent = self()

      spawn(fn ->
        serving =
          Nx.Serving.new(fn opts -> Nx.Defn.jit(&model/1, opts) end, compiler: Nx.Vulkan)
          |> Nx.Serving.batch_size(4)
          |> Nx.Serving.distributed_postprocessing(&Nx.backend_transfer(&1, Nx.BinaryBackend))

        {:ok, _} =
          Nx.Serving.start_link(serving: serving, name: name, partitions: true, batch_timeout: 2)

        send(parent, :started)
        Process.sleep(:infinity)
      end)

      receive do
        :started -> :ok
      end
    end

    # Commands each device has recorded.
    def recorded do
      Nx.Vulkan.flush()
      Map.new(Nx.Vulkan.devices(), &{&1.index, Nx.Vulkan.stats(&1.index).recorded})
    end
  end

defmodule Nx.Vulkan.MultiNodeTest do
  use ExUnit.Case
  alias Nx.Vulkan.PeerHelpers

  defp peer, do: :persistent_term.get(:nxv_peer)

  test "a device tensor of another node is read through its owner, and raises once freed there" do
    {holder, t} = :erpc.call(peer(), PeerHelpers, :hold, [[1.0, 2.0, 3.0]])
    assert node(t.data.ref) == peer()
    assert Nx.to_flat_list(t) == [1.0, 2.0, 3.0]
    assert inspect(t) =~ "1.0, 2.0, 3.0"

    # An op here uploads what it read: the result is this node's.
    sum = Nx.add(t, 1.0)
    assert node(sum.data.ref) == node() and Nx.to_flat_list(sum) == [2.0, 3.0, 4.0]
    assert Nx.to_flat_list(Nx.backend_transfer(t, Nx.BinaryBackend)) == [1.0, 2.0, 3.0]

    ref = Process.monitor(holder)
    send(holder, :drop)
    assert_receive {:DOWN, ^ref, :process, _, _}, 10_000
    :erpc.call(peer(), :erlang, :garbage_collect, [])

    assert_raise ArgumentError,
                 ~r/was freed there .*Nx.backend_transfer\(t, Nx.BinaryBackend\)/,
                 fn ->
                   Nx.to_binary(t)
                 end

    # This node's tensor, read on the peer through this node (this process holds it).
    mine = Nx.iota({4}, type: :s32)
    assert :erpc.call(peer(), Nx, :to_flat_list, [mine]) == [0, 1, 2, 3]

    # A compiled function on the peer called with this node's tensor: fetched, then replayed.
    doubled = :erpc.call(peer(), PeerHelpers, :double_compiled, [Nx.as_type(mine, :f32)])
    assert Nx.to_flat_list(doubled) == [0.0, 2.0, 4.0, 6.0]
  end

  test "a serving on the other node answers batched_run from this one, on every device there" do
    name = Nx.Vulkan.MultiNodeTest.Serving
    :ok = :erpc.call(peer(), PeerHelpers, :start_serving, [name])
    before = :erpc.call(peer(), PeerHelpers, :recorded, [])
    input = fn i -> Nx.iota({8}, type: :f32) |> Nx.divide(i) end

    results =
      1..48
      |> Enum.map(fn i ->
        Task.async(fn ->
          Nx.Serving.batched_run({:distributed, name}, Nx.Batch.stack([input.(i)]))
        end)
      end)
      |> Task.await_many(240_000)

    for {got, i} <- Enum.zip(results, 1..48) do
      assert %Nx.BinaryBackend{} = got.data
      host = input.(i) |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.new_axis(0)
      want = Nx.with_default_backend(Nx.BinaryBackend, fn -> PeerHelpers.model(host) end)
      assert Nx.all_close(got, want, rtol: 1.0e-5) |> Nx.to_number() == 1
    end

    after_ = :erpc.call(peer(), PeerHelpers, :recorded, [])
    assert Map.keys(after_) == [0, 1]
    for d <- [0, 1], do: assert(after_[d] > before[d], "device #{d} of the peer ran no batch")
  end
end

# Distribution starts once every module of this script is compiled (the compiler's processes
# predate the node name and cannot be reached under the new one).
{_, 0} = System.cmd("epmd", ["-daemon"])
{:ok, _} = Node.start(:"nxv_main_#{System.unique_integer([:positive])}@127.0.0.1", :longnames)

{:ok, peer, peer_node} =
  :peer.start(%{
    name: :"nxv_peer_#{System.unique_integer([:positive])}",
    host: ~c"127.0.0.1",
    longnames: true,
    args: [~c"-setcookie", Atom.to_charlist(Node.get_cookie())],
    env: [{~c"NXV_LOGICAL_DEVICES", ~c"2"}]
  })

:ok = :erpc.call(peer_node, :code, :add_paths, [:code.get_path()])

{:module, _} =
  :erpc.call(peer_node, :code, :load_binary, [Nx.Vulkan.PeerHelpers, ~c"nofile", binary])

{:ok, _} = :erpc.call(peer_node, Application, :ensure_all_started, [:nx_vulkan])
:persistent_term.put(:nxv_peer, peer_node)

result = ExUnit.run()
:peer.stop(peer)
System.halt(if result.failures == 0, do: 0, else: 1)
