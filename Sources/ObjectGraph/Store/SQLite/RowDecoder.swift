/// How one entity's rows are read from a full-row select
/// (`SELECT Z_PK, Z_ENT, Z_OPT, <table columns>`): one step per slot, built
/// once when the store maps the model, so decoding a row is a walk over the
/// steps and nothing is looked up per row.
final class RowLayout: Sendable {
    enum Step: Sendable {
        /// A slot without a column (transient, to-many): its default.
        case constant(PropertyValue)
        /// An attribute column.
        case attribute(position: Int32, type: AttributeType)
        /// A to-one's foreign key; the destination comes from the entity
        /// column when there is one (`entityPosition >= 0`), else it is fixed.
        case toOne(position: Int32, entityPosition: Int32, destination: EntityDescription?)
    }

    let entity: EntityDescription
    let steps: [Step]

    init(entity: EntityDescription, columns: [SQLiteSchema.Column?], slotPositions: [Int32], entityPositions: [Int32]) {
        self.entity = entity
        let properties = entity.slotProperties
        steps = properties.indices.map { slot in
            let position = slotPositions[slot]
            guard position >= 0, let column = columns[slot] else {
                return .constant((properties[slot] as? AttributeDescription)?.defaultValue ?? .null)
            }
            switch column.kind {
            case .attribute(let type):
                return .attribute(position: position, type: type)
            case .toOne:
                return .toOne(position: position, entityPosition: entityPositions[slot],
                              destination: (properties[slot] as? RelationshipDescription)?.destinationEntity)
            }
        }
    }
}

/// Turns full-row selects into nodes, keeping the last entity's layout.
struct RowDecoder {
    let schema: SQLiteSchema
    let identity: StoreIdentity
    private var lastNumber: Int64 = -1
    private var lastLayout: RowLayout?

    init(schema: SQLiteSchema, identity: StoreIdentity) {
        self.schema = schema
        self.identity = identity
    }

    mutating func node(from statement: Statement) -> IncrementalStoreNode? {
        let number = statement.int64(at: 1)
        if number != lastNumber {
            lastNumber = number
            lastLayout = schema.entitiesByNumber[number].flatMap { schema.mappings[ObjectIdentifier($0)]?.rowLayout }
        }
        guard let layout = lastLayout else { return nil }
        let steps = layout.steps
        let values = ContiguousArray<PropertyValue>(unsafeUninitializedCapacity: steps.count) { buffer, count in
            for (slot, step) in steps.enumerated() {
                buffer.initializeElement(at: slot, to: value(of: step, in: statement))
            }
            count = steps.count
        }
        return IncrementalStoreNode(objectID: ObjectID(entity: layout.entity, store: identity, primaryKey: statement.int64(at: 0)),
                                    values: values, version: statement.int64(at: 2))
    }

    @inline(__always)
    private func value(of step: RowLayout.Step, in statement: Statement) -> PropertyValue {
        switch step {
        case .constant(let value):
            return value
        case .attribute(let position, let type):
            return statement.attributeValue(at: position, type: type)
        case .toOne(let position, let entityPosition, let fixed):
            if statement.isNull(at: position) { return .null }
            let destination = entityPosition >= 0 ? schema.entitiesByNumber[statement.int64(at: entityPosition)] : fixed
            guard let destination else { return .null }
            return .object(ObjectID(entity: destination, store: identity, primaryKey: statement.int64(at: position)))
        }
    }
}
