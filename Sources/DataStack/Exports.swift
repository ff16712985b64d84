// The stack is built on the object graph engine; users import DataStack alone.
@_exported import ObjectGraph
