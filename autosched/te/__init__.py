"""The tensor-expression layer behind :mod:`autosched.expr`, in modules that import one way only.

    nodes      expression nodes (frozen dataclasses), their constructors, ``to_str``
    traverse   children, walk, rewrite, substitute                          (nodes)
    functions  math functions, reductions, conditions                        (nodes)
    tensor     Tensor, PlaceholderOp, ComputeOp, ScanOp; placeholder, compute (nodes, traverse)
    reducers   comm_reducer, min_value, max_value                           (nodes, traverse)
    scan       scan                                                         (nodes, tensor)
    ccode      CCode: user C (source, headers, libraries) a kernel carries     ()
    buffer     decl_buffer, call_extern, call_pure_extern; buffer nodes     (nodes, ccode)
    ir_builder the statements of an extern body and their builder            (nodes, buffer)
    packed     register_func; the C call sites of Python callbacks          (buffer)
    extern     extern, call_packed, call_intrin                  (tensor, ir_builder, packed)
    rename     unique_names: a copy of a DAG whose operations' names differ (tensor, traverse)
    dag        topo_order, op_to_str, dag_key                       (nodes, tensor, rename)
    intrin     decl_tensor_intrin, TensorIntrin, CImpl                       (nodes, tensor, dag)

Users and the rest of autosched import these names from :mod:`autosched.expr`, which re-exports
them all; this package imports nothing from above itself.
"""
