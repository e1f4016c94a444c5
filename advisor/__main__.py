from advisor.cli.app import main

raise SystemExit(main())
