import Testing
@testable import Audit
