@_spi(DataStackInternal) import DataStackSQLite
@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

/// Turns full-row selects into nodes, keeping the last entity's layout.
///
/// A row whose entity number (`Z_ENT`, or a to-one's entity column) no entity
/// of the model has throws ``PersistentStoreError/Code/incompatibleModel``
/// naming the row: skipping it would turn a store the model does not describe
/// into a missing row or an empty relationship.
struct RowDecoder {
    let schema: TableLayout
    let identity: StoreIdentity
    let url: URL?
    private var lastNumber: Int64 = -1
    private var lastLayout: RowLayout?
    private var lastEntity: EntityDescription?
    private var scopes: ObjectIDScopeCache

    init(schema: TableLayout, identity: StoreIdentity, url: URL?) {
        self.schema = schema
        self.identity = identity
        self.url = url
        self.scopes = ObjectIDScopeCache(store: identity)
    }

    /// The row's values, for a full-row select.
    mutating func node(from statement: Statement) throws -> IncrementalStoreNode {
        let layout = try layout(of: statement)
        return try node(from: statement, layout: layout, steps: layout.steps, scope: scopes.scope(of: layout.entity))
    }

    /// A row's node. The layout's steps and the entity's ID scope come from
    /// the caller, who holds them for a run of rows of one entity: read
    /// through the layout at each row, they were retained and released there
    /// (atomic operations: few instructions, but a tenth of a large fetch's
    /// time).
    @inline(__always)
    private mutating func node(from statement: Statement, layout: RowLayout, steps: borrowing [RowLayout.Step],
                               scope: ObjectIDScope) throws -> IncrementalStoreNode {
        // `reserveCapacity` and `append` are specialized here; the standard
        // library's `init(unsafeUninitializedCapacity:)` allocates through an
        // unspecialized function that looks the array's storage type up in the
        // runtime's metadata cache at every call (~680 instructions a row).
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(steps.count)
        for slot in 0..<steps.count {
            values.append(try value(of: steps[slot], in: statement, slot: slot, layout: layout))
        }
        return IncrementalStoreNode(objectID: ObjectID(scope: scope, primaryKey: statement.int64(at: 0)),
                                    values: values, version: statement.int64(at: 2))
    }

    /// Every row left in a full-row select, for ``node(from:)``'s callers
    /// that read them all. Rows come in runs of one entity: the layout, its
    /// steps and the ID scope are resolved at a run's first row and held in
    /// constants of the run, so no row retains any of them.
    mutating func nodes(from statement: Statement) throws -> [IncrementalStoreNode] {
        var nodes: [IncrementalStoreNode] = []
        var more = try statement.step()
        while more {
            let number = statement.int64(at: 1)
            let layout = try layout(of: statement)
            let steps = layout.steps
            let scope = scopes.scope(of: layout.entity)
            repeat {
                nodes.append(try node(from: statement, layout: layout, steps: steps, scope: scope))
                more = try statement.step()
            } while more && statement.int64(at: 1) == number
        }
        return nodes
    }

    /// Every row left in a full-row select as bytes, for a fetch of faults
    /// (see ``EncodedStoreNode``): the same values as ``node(from:)``,
    /// decoded when a fault fires. In runs of one entity, as ``nodes(from:)``.
    mutating func encodedNodes(from statement: Statement) throws -> [EncodedStoreNode] {
        var rows: [EncodedStoreNode] = []
        let encoder = EncodedStoreNode.Builder()
        var more = try statement.step()
        while more {
            let number = statement.int64(at: 1)
            let layout = try layout(of: statement)
            let steps = layout.steps
            let scope = scopes.scope(of: layout.entity)
            repeat {
                for slot in 0..<steps.count {
                    if case .attribute(let position, let type) = steps[slot] {
                        statement.encodeAttribute(at: position, type: type, into: encoder)
                    } else {
                        encoder.append(try value(of: steps[slot], in: statement, slot: slot, layout: layout))
                    }
                }
                rows.append(encoder.finish(scope: scope, primaryKey: statement.int64(at: 0), version: statement.int64(at: 2)))
                more = try statement.step()
            } while more && statement.int64(at: 1) == number
        }
        return rows
    }

    /// The row's ID, for a select of `Z_PK, Z_ENT` first.
    mutating func objectID(from statement: Statement) throws -> ObjectID {
        scopes.objectID(of: try entity(of: statement), primaryKey: statement.int64(at: 0))
    }

    private mutating func entity(of statement: Statement) throws -> EntityDescription {
        let number = statement.int64(at: 1)
        if number == lastNumber, let lastEntity { return lastEntity }
        guard let entity = schema.entitiesByNumber[number] else {
            throw unknownEntity(number, row: statement.int64(at: 0))
        }
        lastNumber = number
        lastEntity = entity
        lastLayout = nil
        return entity
    }

    private mutating func layout(of statement: Statement) throws -> RowLayout {
        if statement.int64(at: 1) == lastNumber, let lastLayout { return lastLayout }
        let entity = try entity(of: statement)
        guard let layout = schema.mappings[ObjectIdentifier(entity)]?.rowLayout else {
            throw unknownEntity(lastNumber, row: statement.int64(at: 0))
        }
        lastLayout = layout
        return layout
    }

    @inline(__always)
    private mutating func value(of step: RowLayout.Step, in statement: Statement, slot: Int, layout: RowLayout) throws -> PropertyValue {
        switch step {
        case .constant(let index):
            return layout.constants[index]
        case .attribute(let position, let type):
            return statement.attributeValue(at: position, type: type)
        case .externalData(let position):
            guard let column = statement.data(at: position) else { return .null }
            let property = Self.propertyName(at: slot, of: layout)
            return .data(try ExternalBinaryStorage(storeURL: url).value(
                fromColumn: column, describing: "\(layout.entity.name).\(property) of row \(statement.int64(at: 0))"))
        case .toOne(let position, let entityPosition, let destination):
            if statement.isNull(at: position) { return .null }
            guard entityPosition >= 0 else {
                guard let target = layout.destinations[destination] else { return .null }
                return .object(scopes.objectID(of: target, primaryKey: statement.int64(at: position)))
            }
            let number = statement.int64(at: entityPosition)
            guard let destination = schema.entitiesByNumber[number] else {
                throw PersistentStoreError(.incompatibleModel, url: url, message: """
                    the to-one '\(Self.propertyName(at: slot, of: layout))' of \(layout.entity.name) row \
                    \(statement.int64(at: 0)) points at entity number \(number), which no entity of the model has
                    """)
            }
            return .object(scopes.objectID(of: destination, primaryKey: statement.int64(at: position)))
        }
    }

    /// The name of the property in `slot`, for messages. Out of line: read
    /// in the row loop, the entity's property list began an exclusivity check
    /// at every row (~75 instructions), which rows of columns alone never used.
    @inline(never)
    private static func propertyName(at slot: Int, of layout: RowLayout) -> String {
        layout.entity.slotProperties[slot].name
    }

    private func unknownEntity(_ number: Int64, row: Int64) -> PersistentStoreError {
        PersistentStoreError(.incompatibleModel, url: url, message: """
            row \(row) has entity number (Z_ENT) \(number), which no entity of the model has
            """)
    }
}
