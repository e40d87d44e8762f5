defmodule Nx.Vulkan.Compiler do
  @moduledoc false
  # The Nx.Defn.Compiler behind `compiler: Nx.Vulkan` (Nx.Vulkan delegates its callbacks here).
  #
  # A function is traced once per structure (the defn function, the argument templates and the
  # options), then run once under Nx.Defn.Evaluator on placeholder tensors while this process
  # captures its commands (native capture.rs): the ops choose kernels exactly as they do eagerly,
  # and what they would have queued becomes the program (folded, fused, ordered by level in
  # capture.rs and fuse.rs). A call then checks nothing per op: it hands the arguments' buffers
  # to one NIF, which queues the program (pre-recorded, or its commands with the caller's
  # buffers bound) and returns fresh output buffers at once. Results are bit for bit the
  # Evaluator's on this device.
  #
  # The Evaluator reads `while` conditions and `cond` predicates on the host. At capture, a value
  # that depends on no argument is real (input-independent commands run at once: constant
  # folding), so such a read works and a loop with a fixed trip count unrolls into the program.
  # A `while` whose condition depends on the arguments becomes a device loop (loops.rs, "Device
  # loops" below): its condition and body are captured as programs of their own and the GPU
  # thread iterates them, so the caller reads nothing mid-work.
  # Hooks: at capture every named hook records the value it is given instead of calling back;
  # those values become outputs of the program too, and each call hands them to the hook
  # functions (the `:hooks` option's, else the hook's own), in the order the Evaluator would
  # call them, once the program is queued (a hook that reads its value waits for it).
  #
  # Functions the capture cannot hold run under the Evaluator on the eager backend, every call,
  # counted by reason (census/0): control flow that depends on the arguments, tokens and runtime
  # calls (host callbacks), and anything else that needs the host mid-work (a host fallback, a
  # deferred check of integer division by a tensor...). Results are the same either way; only
  # the speed differs.
  #
  # Built programs live in Nx.Vulkan.ProgramCache (bounded; emptied when device memory runs out).
  @behaviour Nx.Defn.Compiler

  alias Nx.Defn.{Composite, Evaluator, Expr, Tree}
  alias Nx.Tensor, as: T
  alias Nx.Vulkan.{Native, ProgramCache}

  @census :nx_vulkan_compiler_census

  def create_tables do
    ProgramCache.create_table()
    :ets.new(@census, [:named_table, :public, :set, write_concurrency: true])
  end

  # One partition per device (Nx.Serving's `partitions: true`): each runs its programs on its
  # own device, with its own queue and GPU thread. `:devices` (a list of indices) limits them;
  # a `:device` is one partition.
  @impl true
  def __partitions_options__(opts) do
    case Keyword.fetch(opts, :device) do
      {:ok, _} ->
        [opts]

      :error ->
        {devices, opts} =
          Keyword.pop_lazy(opts, :devices, fn -> Enum.map(Nx.Vulkan.devices(), & &1.index) end)

        Enum.map(devices, &Keyword.put(opts, :device, &1))
    end
  end

  @impl true
  def __to_backend__(opts), do: {Nx.Vulkan.Backend, Keyword.take(opts, [:device])}

  @impl true
  def __jit__(key, vars, fun, args_list, opts), do: __compile__(key, vars, fun, opts).(args_list)

  @impl true
  def __compile__(key, vars, fun, opts) do
    {program, evaluator} = entry(key, vars, fun, opts)

    # Functions that run under the Evaluator keep its compiled function here, in the closure,
    # not in the cache: an expression is a DAG, and ETS would copy it as a tree (an eigh's
    # unrolls to billions of words).
    evaluator =
      case program do
        {:evaluator, _} -> evaluator || Evaluator.__compile__(key, vars, fun, opts)
        _ -> nil
      end

    device = device!(opts)
    fn args_list -> Enum.map(args_list, &call(program, evaluator, device, &1)) end
  end

  @doc false
  # %{reason => calls} for the calls that ran under the Evaluator, and the programs' counters.
  def census do
    for {key, count} <- :ets.tab2list(@census),
        reduce: %{programs: 0, replays: 0, evaluator: %{}} do
      acc ->
        case key do
          {:evaluator, reason} -> put_in(acc, [:evaluator, reason], count)
          counter -> Map.put(acc, counter, count)
        end
    end
  end

  @doc false
  # The program behind a function's structure (Nx.Vulkan.program_info/3): built if needed,
  # through Nx.Defn's own argument handling (Info below is a compiler that answers this).
  def info(fun, args, opts) do
    Nx.Defn.jit_apply(fun, args, Keyword.put(opts, :compiler, __MODULE__.Info))
  end

  @doc false
  def entry_info(key, vars, fun, opts) do
    case entry(key, vars, fun, opts) do
      {{:evaluator, reason}, _} -> {:evaluator, reason}
      {%{ref: ref}, _} -> Native.program_info(ref)
    end
  end

  defp bump(key), do: :ets.update_counter(@census, key, 1, {key, 0})

  ## The cache

  # {program, evaluator}: the cached program (or {:evaluator, reason}), and the Evaluator's
  # compiled function when this call built the entry (nil when it came from the cache).
  defp entry(key, vars, fun, opts) do
    cache_key = {key, vars |> Composite.flatten_list() |> Enum.map(&Nx.to_template/1), opts}

    case ProgramCache.get(cache_key) do
      nil ->
        {program, evaluator} = build(key, vars, fun, opts)
        ProgramCache.put(cache_key, program)
        {program, evaluator}

      program ->
        {program, nil}
    end
  end

  ## Building

  defp build(key, vars, fun, opts) do
    device = device!(opts)
    started = System.monotonic_time()
    expr = fun.(vars)
    traced = System.monotonic_time()
    evaluator = Evaluator.__compile__(key, vars, fn _ -> expr end, opts)

    # The capture runs the expression with its argument-dependent loops made device loops.
    looped = device_loops(expr, device, opts)
    capturing = Evaluator.__compile__(key, vars, fn _ -> looped end, opts)

    program =
      case unsupported(expr) do
        {nil, []} ->
          capture(capturing, placeholders(vars, device), [], device, false)

        {nil, hooks} ->
          # The hooks record at capture; a call hands their values to the functions the
          # Evaluator would resolve: the :hooks option's, else the hook's own (nil: none).
          # Recording goes by name, so hooks that share a name but not a function (and have
          # no override) stay with the Evaluator, which calls each its own.
          # (`hooks` holds each {name, function} once, so a name twice has two functions.)
          overrides = Keyword.get(opts, :hooks, %{})
          names = Enum.frequencies_by(hooks, &elem(&1, 0))

          if Enum.any?(names, fn {name, count} ->
               count > 1 and not Map.has_key?(overrides, name)
             end) do
            {:evaluator, "hooks of one name with different functions"}
          else
            callbacks = Map.new(hooks, fn {name, own} -> {name, overrides[name] || own} end)
            recorders = Map.new(hooks, fn {name, _} -> {name, &record_hook(name, &1)} end)
            options = Keyword.put(opts, :hooks, recorders)
            capturing = Evaluator.__compile__(key, vars, fn _ -> looped end, options)
            capture(capturing, placeholders(vars, device), callbacks, device, false)
          end

        {reason, _} ->
          {:evaluator, reason}
      end

    done = System.monotonic_time()

    {kind, dispatches} =
      case program do
        {:evaluator, reason} ->
          {reason, 0}

        %{ref: ref} ->
          bump(:programs)
          {:program, Native.program_info(ref).dispatches}
      end

    :telemetry.execute(
      [:nx_vulkan, :compile],
      %{trace_us: us(traced - started), capture_us: us(done - traced), dispatches: dispatches},
      %{result: if(kind == :program, do: :program, else: :evaluator), reason: kind}
    )

    {program, evaluator}
  end

  defp us(native), do: System.convert_time_unit(native, :native, :microsecond)

  # {why the expression cannot be captured or nil, its hooks as {name, own callback}}.
  # (`while` and `cond` are tried: a condition that depends on no argument, such as a fixed trip
  # count, is read at capture and the loop unrolls into the program; one that depends on them
  # makes the capture give up.)
  defp unsupported(expr) do
    {_, reason, hooks} = Composite.reduce(expr, {%{}, nil, []}, &scan/2)
    {reason, Enum.uniq(hooks)}
  end

  @host_ops %{
    token: "hooks on tokens (host callbacks)",
    attach_token: "hooks on tokens (host callbacks)",
    runtime_call: "a runtime call (a host callback)"
  }

  defp scan(_, {_, reason, _} = acc) when reason != nil, do: acc

  defp scan(%T{data: %Expr{id: id, op: op, args: args}}, {seen, nil, hooks}) do
    cond do
      Map.has_key?(seen, id) ->
        {seen, nil, hooks}

      Map.has_key?(@host_ops, op) ->
        {seen, @host_ops[op], hooks}

      op == :hook ->
        case hook_name(Enum.at(args, 1)) do
          nil ->
            {seen, "a hook without a name", hooks}

          name ->
            hook = {name, hook_callback(Enum.at(args, 1))}
            Enum.reduce(args, {Map.put(seen, id, true), nil, [hook | hooks]}, &scan_arg/2)
        end

      true ->
        Enum.reduce(args, {Map.put(seen, id, true), nil, hooks}, &scan_arg/2)
    end
  end

  defp scan(_, acc), do: acc

  defp scan_arg(_, {_, reason, _} = acc) when reason != nil, do: acc
  defp scan_arg(%T{} = t, acc), do: scan(t, acc)
  defp scan_arg(list, acc) when is_list(list), do: Enum.reduce(list, acc, &scan_arg/2)

  defp scan_arg(tuple, acc) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.reduce(acc, &scan_arg/2)

  defp scan_arg(_, acc), do: acc

  # A hook's callback spec, as Nx.Defn.Expr.hook/2 builds it and the Evaluator resolves it.
  defp hook_name({:named, name, _callback}), do: name
  defp hook_name({:token_hook, _expr, inner}), do: hook_name(inner)
  defp hook_name(_), do: nil

  defp hook_callback({:named, _name, callback}), do: callback
  defp hook_callback({:token_hook, _expr, inner}), do: hook_callback(inner)

  @hook_values :nx_vulkan_hook_values

  defp record_hook(name, value),
    do: Process.put(@hook_values, [{name, value} | Process.get(@hook_values, [])])

  # Runs the function once on `placeholders` (device tensors for the arguments, one flat list)
  # while capturing; the program, or why not. Named hooks record their values (`callbacks`:
  # name => the function a call hands them to). `for_loop`: a device loop's condition or body.
  defp capture(evaluator, placeholders, callbacks, device, for_loop) do
    Process.delete(@hook_values)

    Native.capture_begin(Enum.map(placeholders, & &1.data.ref), device, for_loop)
    |> Native.unwrap!()

    try do
      # The function's constants are made on the program's device.
      [output] =
        on_device(device, fn -> evaluator.([Enum.map(placeholders, &fn -> &1 end)]) end)

      output
    catch
      kind, value ->
        # The capture's own reason (a host read...) says more than the exception it caused.
        message = Exception.format_banner(kind, value) |> String.slice(0, 300)

        case Native.capture_end([], []) |> Native.unwrap!() do
          {:gave_up, reason} -> {:evaluator, reason}
          _ -> {:evaluator, "raised while recorded: " <> message}
        end
    else
      output ->
        # The hooks' values, in the order they were given: more outputs of the program.
        hooks = @hook_values |> Process.get([]) |> Enum.reverse()
        hooked = Enum.map(hooks, fn {_name, value} -> value end)
        outputs = Composite.flatten_list([output | hooked])

        if Enum.all?(outputs, &match?(%T{data: %Nx.Vulkan.Backend{}}, &1)) do
          refs = Enum.map(outputs, & &1.data.ref)

          case Native.capture_end(Enum.map(placeholders, & &1.data.ref), refs)
               |> Native.unwrap!() do
            {:gave_up, reason} ->
              {:evaluator, reason}

            {:ok, ref, kinds} ->
              functions = Enum.map(hooks, fn {name, _value} -> callbacks[name] end)

              %{
                ref: ref,
                kinds: kinds,
                output: {output, List.to_tuple(hooked)},
                hooks: functions,
                device: device
              }
          end
        else
          Native.capture_cancel()
          {:evaluator, "an output is not a device tensor"}
        end
    after
      # Whatever happened, this process captures nothing more (a no-op after capture_end).
      Native.capture_cancel()
      Process.delete(@hook_values)
    end
  end

  defp placeholders(vars, device),
    do: vars |> Composite.flatten_list() |> Enum.map(&placeholder(&1, device))

  defp placeholder(var, device) do
    %T{type: {_, bits}} = t = Nx.devectorize(var)
    ref = Native.alloc_buffer(div(Nx.size(t) * bits + 7, 8), device) |> Native.unwrap!()
    %{t | data: %Nx.Vulkan.Backend{ref: ref}}
  end

  ## Device loops

  # A `while` whose condition depends on the arguments (its state reaches the condition from an
  # initial value computed from them, directly or through the body) becomes a runtime_call node
  # whose function, at capture, records a device loop; hooks inside the loop keep it a `while`
  # (the Evaluator's order of hook calls). A loop nested in a device loop's body is a device
  # loop inside it (the outer one then reads its condition before each iteration); one nested
  # in an unrolled loop's body is a device loop of its own at each unrolled iteration. The rewrite keeps
  # every other node, ids included; nodes above a rewritten one are rebuilt.
  defp device_loops(expr, device, opts) do
    {expr, _memo} = Composite.traverse(expr, %{}, &rewrite_loop(&1, &2, device, opts))
    expr
  end

  defp rewrite_loop(%T{data: %Expr{id: id, op: op}} = t, memo, device, opts) do
    case memo do
      %{^id => done} ->
        {done, memo}

      %{} ->
        {args, memo} = Tree.apply_args(t, :scope, memo, &rewrite_loop(&1, &2, device, opts))
        t = put_in(t.data.args, args)

        t =
          cond do
            op == :while and device_loop?(t) -> to_device_loop(t, device, opts)
            op == :while -> in_unrolled_body(t, device, opts)
            op == :cond and not tuple?(t) and selects?(t) -> selects(t, & &1)
            op == :elem and selects?(hd(args)) -> selects(hd(args), &elem(&1, Enum.at(args, 1)))
            true -> t
          end

        {t, Map.put(memo, id, t)}
    end
  end

  defp rewrite_loop(other, memo, _device, _opts), do: {other, memo}

  ## Conditionals as selects

  # A `cond` whose predicates depend on the scope's parameters (the arguments, or a loop's
  # state) would make the capture give up at its host read. Instead every branch computes and
  # the predicates choose, first true clause first: select(p1, b1, select(p2, b2, last)). Nx has
  # cast and broadcast the branches to the result's type and shape already, and a select's
  # predicate is true where it is not zero, as the Evaluator reads one. Only branches that just
  # compute: a loop might not end, a hook must not fire and an integer division must not raise
  # where its branch is not taken (such a cond stays, and the function runs under the
  # Evaluator). A tuple result is chosen leaf by leaf, where its `elem` nodes read it.
  defp selects?(%T{data: %Expr{op: :cond, args: [clauses, last]}} = t) do
    {preds, bodies} = Enum.unzip(clauses)
    leaves = Composite.flatten_list([last | bodies])

    Enum.any?(preds, &(MapSet.size(parameters(&1)) > 0)) and
      Enum.all?([t | preds ++ leaves], &(&1.vectorized_axes == [])) and
      computes_only?(preds ++ leaves)
  end

  defp selects?(_), do: false

  defp selects(%T{data: %Expr{args: [clauses, last]}}, pick) do
    List.foldr(clauses, pick.(last), fn {pred, body}, otherwise ->
      Nx.select(pred, pick.(body), otherwise)
    end)
  end

  defp tuple?(%T{type: type}), do: match?({:tuple, _}, type)

  @not_pure [:while, :hook, :token, :attach_token, :runtime_call]
  # Ops that raise on some values (integer division by zero, a negative integer exponent or
  # shift, a singular matrix: deferred checks): in a branch not taken they must not.
  @may_raise [:quotient, :remainder, :pow, :left_shift, :right_shift, :triangular_solve]

  # Whether `exprs` hold no loop, hook, host call or op that may raise (anywhere below them).
  defp computes_only?(exprs) do
    {_, pure?} = Enum.reduce(exprs, {%{}, true}, &pure/2)
    pure?
  end

  defp pure(_, {_, false} = acc), do: acc

  defp pure(%T{data: %Expr{id: id, op: op, args: args}} = t, {seen, true}) do
    cond do
      Map.has_key?(seen, id) -> {seen, true}
      op in @not_pure -> {seen, false}
      op in @may_raise and (op == :triangular_solve or Nx.Type.integer?(t.type)) -> {seen, false}
      true -> pure_args(args, {Map.put(seen, id, true), true})
    end
  end

  defp pure(_, acc), do: acc

  defp pure_args(args, acc) do
    Enum.reduce(args, acc, fn
      %T{} = t, acc -> pure(t, acc)
      list, acc when is_list(list) -> pure_args(list, acc)
      tuple, acc when is_tuple(tuple) -> pure_args(Tuple.to_list(tuple), acc)
      _, acc -> acc
    end)
  end

  # A `while` the capture unrolls (its condition depends on no argument): the loops in its body
  # (a scope of its own) that depend on the arguments become device loops too, each recorded
  # at every unrolled iteration.
  defp in_unrolled_body(%T{data: %Expr{args: [initial, arg, pred, body]}} = t, device, opts) do
    put_in(t.data.args, [initial, arg, pred, device_loops(body, device, opts)])
  end

  defp device_loop?(%T{data: %Expr{args: [initial, _arg, pred, body]}}) do
    initial = Composite.flatten_list([initial])
    body = Composite.flatten_list([body])

    derived =
      for {value, i} <- Enum.with_index(initial),
          MapSet.size(parameters(value)) > 0,
          into: MapSet.new(),
          do: i

    derived = reach(derived, body)

    # (Host ops and hooks inside: what `unsupported/1` looks for in a whole function.)
    Enum.any?(parameters(pred), &MapSet.member?(derived, &1)) and
      unsupported(List.to_tuple([pred | body])) == {nil, []}
  end

  # The state slots whose values derive from the arguments: those of `derived`, and those the
  # body computes from them, until nothing changes.
  defp reach(derived, body) do
    more =
      for {out, i} <- Enum.with_index(body),
          not MapSet.member?(derived, i),
          Enum.any?(parameters(out), &MapSet.member?(derived, &1)),
          into: derived,
          do: i

    if MapSet.size(more) == MapSet.size(derived), do: derived, else: reach(more, body)
  end

  # The indices of the parameters `expr` reads in its own scope (a nested loop's initial values
  # are in scope, its body is not).
  defp parameters(expr) do
    {_, {_seen, params}} = Composite.traverse(expr, {%{}, MapSet.new()}, &collect_parameters/2)
    params
  end

  defp collect_parameters(%T{data: %Expr{id: id, op: op, args: args}} = t, {seen, params} = acc) do
    cond do
      Map.has_key?(seen, id) ->
        {t, acc}

      op == :parameter ->
        {t, {Map.put(seen, id, true), MapSet.put(params, hd(args))}}

      true ->
        {_, acc} =
          Tree.apply_args(t, :scope, {Map.put(seen, id, true), params}, &collect_parameters/2)

        {t, acc}
    end
  end

  defp collect_parameters(other, acc), do: {other, acc}

  defp to_device_loop(%T{data: %Expr{args: [initial, arg, pred, body]} = data} = t, device, opts) do
    template = Composite.traverse(arg, &Nx.to_template/1)
    # Loops in the body that depend on its state are device loops of their own (loops.rs runs
    # a body with loops inside one checked iteration at a time); conds become selects.
    body = device_loops(body, device, opts)
    pred = device_loops(pred, device, opts)
    spec = %{arg: arg, pred: pred, body: body, device: device, opts: opts}
    %{t | data: %{data | op: :runtime_call, args: [initial, &run_device_loop/2, template, spec]}}
  end

  # At capture (the Evaluator calls it with the loop's initial state): the loop's programs, and
  # the loop recorded on them; the final state's tensors.
  defp run_device_loop(initial, %{arg: arg, device: device} = spec) do
    initial = [initial] |> Composite.flatten_list() |> Enum.map(&device_input(&1, device).ref)

    looped =
      case build_device_loop(spec) do
        {:ok, looped} ->
          looped

        {:gave_up, reason} ->
          Native.capture_give_up("a device loop: " <> reason) |> Native.unwrap!()
      end

    refs = Native.loop_run(looped, initial) |> Native.unwrap!()

    results =
      Enum.zip_with(Composite.flatten_list([arg]), refs, fn param, ref ->
        %{Nx.to_template(param) | data: %Nx.Vulkan.Backend{ref: ref}}
      end)

    case arg do
      %T{} -> hd(results)
      _ -> List.to_tuple(results)
    end
  end

  # The condition (as a u32: not zero) and the body captured over one set of state buffers, in a
  # process of their own (this one is capturing the enclosing function).
  defp build_device_loop(%{arg: arg, pred: pred, body: body, device: device, opts: opts}) do
    params = Composite.flatten_list([arg])
    # The gate is a u32 that is not zero while the loop runs: a cast keeps an integer of up to
    # 32 bits nonzero (a comparison's u8, say: one dispatch); other types are compared with 0.
    flag =
      case pred.type do
        {kind, bits} when kind in [:s, :u] and bits < 32 ->
          Nx.as_type(pred, {:u, 32})

        {:s, 32} ->
          Nx.as_type(pred, {:u, 32})

        type ->
          zero = Expr.constant(%T{shape: {}, type: type, names: []}, 0, [])
          pred |> Nx.not_equal(zero) |> Nx.as_type({:u, 32})
      end

    # A new process has no default backend of its own (the loop's constants go to the device);
    # what it raises becomes a reason, so the caller's capture gives up instead of exiting with
    # the linked task.
    Task.async(fn ->
      try do
        Nx.with_default_backend({Nx.Vulkan.Backend, device: device}, fn ->
          capture_device_loop(params, flag, body, device, opts)
        end)
      rescue
        e -> {:gave_up, "raised while building it: " <> String.slice(Exception.message(e), 0, 300)}
      end
    end)
    |> Task.await(:infinity)
  end

  defp capture_device_loop(params, flag, body, device, opts) do
    state = Enum.map(params, &placeholder(&1, device))

    sub =
      &capture(
        Evaluator.__compile__(make_ref(), params, fn _ -> &1 end, opts),
        state,
        [],
        device,
        true
      )

    with %{ref: cond, output: {flag, {}}} <- sub.(flag),
         %{ref: next, output: {out, {}}} <- sub.(body) do
      next_refs = Enum.map(Composite.flatten_list([out]), & &1.data.ref)
      state_refs = Enum.map(state, & &1.data.ref)

      case Native.loop_new(cond, flag.data.ref, next, next_refs, state_refs) do
        {:ok, looped} -> {:ok, looped}
        {:error, {_kind, message}} -> {:gave_up, message}
      end
    else
      {:evaluator, reason} -> {:gave_up, reason}
    end
  end

  # The device a function runs on: the :device option (checked as the backend checks it), else
  # the default.
  defp device!(opts) do
    case Keyword.fetch(opts, :device) do
      {:ok, device} ->
        Nx.Vulkan.Backend.init(device: device)
        device

      :error ->
        Nx.Vulkan.Device.default_index()
    end
  end

  # Runs `fun` with the device's backend as the process default when a device was asked for, so
  # the constants the Evaluator makes land there.
  defp on_device(device, fun) do
    if device == Nx.Vulkan.Device.default_index(),
      do: fun.(),
      else: Nx.with_default_backend({Nx.Vulkan.Backend, device: device}, fun)
  end

  ## Calling

  defp call({:evaluator, reason}, evaluator, device, params) do
    bump({:evaluator, reason})
    [result] = on_device(device, fn -> evaluator.([params]) end)
    result
  end

  defp call(%{ref: ref, kinds: kinds, output: output, hooks: hooks, device: device}, nil, _, params) do
    started = System.monotonic_time()
    inputs = Enum.map(params, &device_input(&1.(), device))

    # Arguments on another device than the program's move there first (through the host).
    {inputs, fresh} =
      case Native.program_run(ref, Enum.map(inputs, & &1.ref)) do
        {:error, {:other_device, _}} ->
          inputs = Enum.map(inputs, &on_program_device(&1, device))
          {inputs, Native.program_run(ref, Enum.map(inputs, & &1.ref))}

        fresh ->
          {inputs, fresh}
      end

    fresh = fresh |> Native.unwrap!() |> List.to_tuple()

    inputs = List.to_tuple(inputs)
    bump(:replays)

    {{result, hooked}, []} =
      Composite.traverse(output, kinds, fn %T{data: data} = t, [kind | rest] ->
        data =
          case kind do
            {:fresh, i} -> %{data | ref: elem(fresh, i)}
            {:input, i} -> elem(inputs, i)
            :external -> data
          end

        {%{t | data: data}, rest}
      end)

    Composite.flatten_list([result]) |> Enum.each(&Nx.Vulkan.Backend.account_result/1)
    run_hooks(hooks, Tuple.to_list(hooked))
    :telemetry.execute([:nx_vulkan, :run], %{host_us: us(System.monotonic_time() - started)}, %{})
    result
  end

  # Each hook's function (nil: none) with its value of this call, in the Evaluator's order.
  defp run_hooks(functions, values) do
    for {fun, value} <- Enum.zip(functions, values), fun != nil, do: fun.(value)
    :ok
  end

  # A tensor of this node's backend as it is; one of another node (fetched from its owner) or of
  # another backend, copied to the program's device.
  defp device_input(%T{} = t, device) do
    case Nx.devectorize(t) do
      %T{data: %Nx.Vulkan.Backend{ref: ref} = data} when node(ref) == node() -> data
      other -> Nx.backend_copy(other, {Nx.Vulkan.Backend, device: device}).data
    end
  end

  defp on_program_device(%Nx.Vulkan.Backend{ref: ref} = data, device) do
    if Native.buffer_device(ref) == device do
      data
    else
      # A template of the buffer's bytes: the copy only moves bytes.
      bytes = Native.byte_size(ref)
      t = %T{data: data, type: {:u, 8}, shape: {bytes}, names: [nil]}
      Nx.backend_copy(t, {Nx.Vulkan.Backend, device: device}).data
    end
  end
end

defmodule Nx.Vulkan.Compiler.Info do
  @moduledoc false
  # A compiler whose "result" is Nx.Vulkan.Compiler's program for the structure (see info/3).
  @behaviour Nx.Defn.Compiler

  @impl true
  def __jit__(key, vars, fun, _args_list, opts),
    do: [Nx.Vulkan.Compiler.entry_info(key, vars, fun, opts)]

  @impl true
  def __compile__(key, vars, fun, opts),
    do: fn _ -> [Nx.Vulkan.Compiler.entry_info(key, vars, fun, opts)] end

  @impl true
  defdelegate __partitions_options__(opts), to: Nx.Vulkan.Compiler

  @impl true
  defdelegate __to_backend__(opts), to: Nx.Vulkan.Compiler
end
