// DataStack re-exports the object graph engine; the stack itself arrives with StackManager.
@_exported import ObjectGraph
