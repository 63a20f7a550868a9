"""Hand-written word lists for the offline sample data (data; two tables are written as text, one row a line).

Every word here was written for niels_gpt; nothing is copied from a corpus. `TOPICS` holds one
lexicon per subject: `nouns` (singular; `_` joins multi-word nouns), `verbs` (base form),
`adjs`, `roles` (people who work in the field) and `fields` (sub-disciplines, `|`-separated).
`sentences.py` inflects these (plurals, -s/-ed/-ing, -ly) and combines them with the
general lists below, syllable-built names and numbers into sentences.
"""

TOPICS = {
    "biology": dict(
        fields="cell biology|genetics|ecology|microbiology|evolutionary biology|zoology",
        nouns="cell membrane protein enzyme chromosome gene mitochondrion ribosome nucleus tissue "
        "organism species habitat predator prey population mutation bacterium virus fungus "
        "spore embryo hormone neuron antibody metabolism photosynthesis pollinator larva "
        "insect mammal reptile amphibian ecosystem food_web gut_flora cell_wall genome "
        "molecule receptor vertebrate parasite host symbiosis",
        verbs="divide replicate adapt evolve inherit digest absorb secrete migrate hibernate "
        "reproduce mutate regulate transcribe synthesize pollinate decompose colonize infect "
        "metabolize express",
        adjs="cellular genetic microbial aquatic terrestrial nocturnal invasive endemic dormant "
        "symbiotic dominant recessive multicellular aerobic anaerobic parasitic venomous "
        "photosynthetic hereditary",
        roles="biologist geneticist ecologist microbiologist zoologist field_researcher",
    ),
    "chemistry": dict(
        fields="organic chemistry|physical chemistry|biochemistry|analytical chemistry|electrochemistry",
        nouns="atom molecule compound element reaction catalyst solvent solution acid base salt "
        "ion electron bond isotope polymer crystal precipitate reagent titration buffer oxide "
        "alloy mixture flask beaker burner pipette spectrum valence equilibrium enthalpy "
        "concentration oxidation electrode nitrogen carbon sulfur chlorine",
        verbs="dissolve react oxidize reduce evaporate condense distil filter neutralize "
        "crystallize ionize bond heat dilute measure weigh titrate combust catalyze",
        adjs="acidic alkaline volatile inert soluble insoluble reactive covalent ionic "
        "organic metallic crystalline toxic corrosive flammable stable gaseous",
        roles="chemist lab_technician biochemist pharmacist metallurgist",
    ),
    "physics": dict(
        fields="mechanics|thermodynamics|optics|electromagnetism|quantum physics|acoustics",
        nouns="force mass velocity acceleration momentum energy wave frequency wavelength "
        "particle field charge current voltage resistance magnet lens mirror prism friction "
        "gravity pressure temperature heat_engine pendulum spring orbit photon quark laser "
        "circuit conductor insulator inertia torque density vacuum",
        verbs="accelerate oscillate reflect refract radiate conduct insulate vibrate collide "
        "rotate magnetize measure resonate propagate absorb emit amplify",
        adjs="kinetic potential thermal electric magnetic optical quantum elastic frictionless "
        "radioactive transparent opaque parallel perpendicular uniform relativistic",
        roles="physicist engineer experimentalist theorist lab_assistant",
    ),
    "astronomy": dict(
        fields="astrophysics|planetary science|cosmology|radio astronomy|astrobiology",
        nouns="star planet moon comet asteroid galaxy nebula telescope observatory eclipse "
        "constellation supernova orbit meteor crater atmosphere ring_system dwarf_planet "
        "black_hole light_year horizon sunspot solar_wind satellite probe rover quasar "
        "exoplanet parallax redshift equinox solstice",
        verbs="orbit observe rotate eclipse collapse expand shine transit launch photograph "
        "catalogue detect drift wobble",
        adjs="celestial lunar solar stellar galactic interstellar cosmic gaseous rocky icy "
        "distant faint luminous binary elliptical",
        roles="astronomer astrophysicist stargazer mission_planner",
    ),
    "geology": dict(
        fields="mineralogy|volcanology|seismology|sedimentology|paleontology",
        nouns="rock mineral granite basalt limestone sandstone shale quartz feldspar fossil "
        "volcano magma lava earthquake fault plate glacier canyon cave stalactite sediment "
        "erosion strata mantle crust core geyser aquifer boulder pebble cliff delta dune",
        verbs="erode deposit erupt fracture compress fold weather melt cool solidify "
        "uplift quarry excavate date survey",
        adjs="igneous sedimentary metamorphic volcanic tectonic porous jagged molten "
        "layered fossilized glacial alluvial seismic",
        roles="geologist volcanologist seismologist surveyor paleontologist",
    ),
    "medicine": dict(
        fields="cardiology|neurology|pediatrics|epidemiology|pharmacology|nutrition",
        nouns="patient doctor nurse clinic hospital symptom diagnosis treatment vaccine dose "
        "fever infection injury fracture bandage heart lung kidney liver blood_pressure "
        "pulse immune_system allergy prescription therapy surgery scan bone muscle joint "
        "skin headache vitamin diet",
        verbs="diagnose treat prescribe vaccinate examine heal recover inflame bleed "
        "monitor operate rehabilitate prevent screen",
        adjs="chronic acute contagious clinical medical surgical painful swollen healthy "
        "sterile allergic cardiac neurological",
        roles="physician nurse surgeon pharmacist paramedic epidemiologist",
    ),
    "history": dict(
        fields="ancient history|medieval history|economic history|military history|archaeology",
        nouns="empire kingdom dynasty treaty war battle revolution republic monarch council "
        "charter castle fortress manuscript chronicle archive colony trade_route merchant "
        "guild peasant noble army siege uprising parliament constitution artifact ruin "
        "coin inscription era century",
        verbs="conquer rule found sign invade rebel negotiate abolish reform crown exile record excavate settle unite",
        adjs="ancient medieval imperial colonial royal feudal revolutionary historic "
        "military diplomatic prehistoric dynastic",
        roles="historian archaeologist archivist chronicler curator",
    ),
    "geography": dict(
        fields="physical geography|human geography|cartography|urban studies|hydrology",
        nouns="continent island peninsula mountain range valley river basin plateau coast "
        "harbour desert rainforest tundra lake border capital province region climate map "
        "latitude longitude elevation population village city watershed strait bay "
        "archipelago savanna wetland",
        verbs="map border flow drain irrigate settle populate urbanize migrate navigate chart flood",
        adjs="coastal mountainous arid tropical temperate polar rural urban fertile remote "
        "landlocked densely_populated",
        roles="geographer cartographer planner surveyor hydrologist",
    ),
    "cooking": dict(
        fields="baking|pastry|fermentation|regional cuisine|food science",
        nouns="recipe ingredient flour butter sugar egg yeast dough oven pan skillet broth "
        "sauce spice herb garlic onion tomato lentil rice noodle bread crust cake pastry "
        "vinegar marinade knife cutting_board saucepan oven_tray stew soup salad dumpling "
        "pickle",
        verbs="bake boil simmer roast fry knead whisk stir chop slice season marinate "
        "ferment grill steam caramelize fold taste garnish",
        adjs="crispy tender savory sweet sour spicy creamy fluffy golden crunchy fresh smoky tangy rich",
        roles="cook baker chef pastry_chef food_writer",
    ),
    "music": dict(
        fields="music theory|composition|orchestration|ethnomusicology|audio engineering",
        nouns="melody harmony rhythm chord scale tempo note octave symphony orchestra choir "
        "violin cello piano guitar drum flute trumpet lyric verse chorus bridge album "
        "concert rehearsal score conductor metronome key_signature interval cadence",
        verbs="compose perform rehearse improvise harmonize conduct tune strum record arrange transpose sing hum",
        adjs="melodic harmonic rhythmic acoustic orchestral minor major syncopated percussive lyrical dissonant",
        roles="composer musician conductor singer drummer sound_engineer",
    ),
    "programming": dict(
        fields="software engineering|data structures|compilers|databases|distributed systems",
        nouns="function variable loop array list dictionary string integer compiler "
        "interpreter library module package bug test exception pointer thread process "
        "database query index cache server client request response algorithm recursion "
        "stack queue hash_table iterator parser repository commit branch",
        verbs="compile debug refactor deploy parse iterate allocate serialize cache index "
        "merge commit import initialize execute benchmark profile",
        adjs="recursive concurrent immutable mutable asynchronous deterministic binary "
        "optional static dynamic verbose lazy",
        roles="programmer developer maintainer reviewer tester",
    ),
    "mathematics": dict(
        fields="algebra|geometry|calculus|number theory|statistics|topology",
        nouns="number equation variable function proof theorem lemma axiom triangle circle "
        "polygon angle vector matrix derivative integral limit sequence series prime "
        "fraction ratio probability sample mean median graph set symmetry coordinate",
        verbs="prove solve calculate estimate integrate differentiate factor simplify "
        "approximate multiply divide subtract add converge diverge",
        adjs="prime rational irrational linear quadratic finite infinite discrete "
        "continuous symmetric orthogonal random",
        roles="mathematician statistician teacher analyst",
    ),
    "law": dict(
        fields="contract law|criminal law|constitutional law|property law|international law",
        nouns="court judge jury lawyer contract statute verdict appeal plaintiff defendant "
        "witness evidence testimony clause lease license patent copyright trademark "
        "regulation ordinance tribunal precedent sentence fine warrant settlement",
        verbs="sue appeal testify rule enforce amend repeal ratify overrule convict acquit draft sign negotiate",
        adjs="legal illegal lawful binding constitutional criminal civil judicial statutory contractual",
        roles="judge lawyer clerk paralegal notary magistrate",
    ),
    "economics": dict(
        fields="macroeconomics|microeconomics|public finance|labour economics|trade",
        nouns="market price supply demand inflation interest_rate wage tax budget deficit "
        "surplus currency bank loan debt investment dividend share stock bond tariff "
        "export import household firm profit revenue cost unemployment",
        verbs="invest borrow lend save spend trade export import tax subsidize inflate compete hire",
        adjs="fiscal monetary economic financial competitive profitable volatile domestic global inflationary",
        roles="economist banker accountant trader analyst",
    ),
    "agriculture": dict(
        fields="agronomy|animal husbandry|soil science|irrigation|horticulture",
        nouns="farm field crop harvest seed soil fertilizer tractor plough barn silo "
        "orchard vineyard wheat barley maize potato cattle sheep goat pasture hay "
        "irrigation_canal greenhouse compost furrow hedge",
        verbs="plant sow harvest plough irrigate graze fertilize prune thresh rotate breed shear milk",
        adjs="arable organic irrigated fallow seasonal pastoral drought-resistant",
        roles="farmer agronomist shepherd grower beekeeper",
    ),
    "architecture": dict(
        fields="urban design|structural engineering|landscape architecture|restoration",
        nouns="building facade column arch vault dome roof beam foundation brick timber "
        "concrete steel window staircase courtyard tower bridge plaza blueprint "
        "floor_plan atrium balcony gable chimney",
        verbs="design build restore renovate insulate reinforce demolish survey draft ventilate",
        adjs="gothic modernist vernacular structural ornate minimalist load-bearing sustainable symmetrical",
        roles="architect builder mason carpenter structural_engineer",
    ),
    "literature": dict(
        fields="poetry|the novel|drama|literary criticism|translation",
        nouns="novel poem stanza chapter character plot narrator theme metaphor sonnet "
        "ballad essay manuscript author reader library anthology preface epilogue "
        "dialogue tragedy comedy fable myth",
        verbs="write narrate translate publish edit revise recite interpret quote illustrate",
        adjs="poetic lyrical tragic comic allegorical satirical fictional epic autobiographical",
        roles="novelist poet editor translator critic librarian",
    ),
    "sports": dict(
        fields="athletics|team sports|sports science|coaching",
        nouns="team player coach match tournament league goal score referee stadium "
        "marathon sprint relay medal training_session stamina injury season fixture "
        "racket ball bicycle swimming_pool",
        verbs="train compete score defend sprint tackle dribble swim cycle stretch qualify coach",
        adjs="athletic competitive aerobic defensive offensive professional amateur endurance",
        roles="athlete coach referee trainer captain",
    ),
    "art": dict(
        fields="painting|sculpture|printmaking|art history|ceramics",
        nouns="painting canvas brush pigment palette sculpture statue clay kiln glaze "
        "portrait landscape fresco mural gallery exhibition sketch charcoal easel "
        "perspective composition",
        verbs="paint sketch sculpt carve glaze exhibit frame restore shade blend",
        adjs="abstract realistic vivid muted impressionist decorative figurative monochrome",
        roles="painter sculptor potter curator illustrator",
    ),
    "climate": dict(
        fields="meteorology|climatology|oceanography|glaciology",
        nouns="weather climate rainfall drought storm hurricane monsoon humidity "
        "temperature wind front cloud fog frost snowfall heatwave forecast carbon "
        "emission ice_sheet sea_level jet_stream barometer",
        verbs="forecast warm cool evaporate precipitate melt freeze circulate measure record",
        adjs="humid dry windy stormy tropical arctic seasonal atmospheric oceanic extreme",
        roles="meteorologist climatologist forecaster oceanographer",
    ),
    "transport": dict(
        fields="railways|shipping|aviation|urban transport|logistics",
        nouns="train locomotive railway station platform timetable ship harbour ferry "
        "cargo container aircraft runway airport bus tram bicycle road motorway "
        "junction canal lock freight ticket",
        verbs="travel commute ship deliver navigate dock board depart arrive haul schedule",
        adjs="electric diesel high-speed overnight coastal freight commuter",
        roles="driver pilot conductor navigator dispatcher",
    ),
    "psychology": dict(
        fields="cognitive psychology|developmental psychology|social psychology|neuroscience",
        nouns="memory attention perception emotion habit motivation learning behaviour "
        "personality stress sleep dream bias decision reward experiment participant "
        "questionnaire",
        verbs="remember forget perceive learn imitate recall focus react adapt cope",
        adjs="cognitive emotional social behavioural conscious unconscious anxious curious",
        roles="psychologist therapist researcher counsellor",
    ),
    "education": dict(
        fields="pedagogy|curriculum design|early education|adult learning",
        nouns="school teacher student lesson classroom curriculum exam homework textbook "
        "lecture seminar university degree scholarship library notebook worksheet "
        "timetable tutor",
        verbs="teach learn study revise explain assess grade tutor practise enrol",
        adjs="academic educational primary secondary practical collaborative rigorous",
        roles="teacher tutor lecturer principal student",
    ),
    "gardening": dict(
        fields="horticulture|botany|permaculture|landscape gardening",
        nouns="garden seedling root stem leaf flower bloom petal shrub hedge lawn "
        "weed mulch trowel watering_can raised_bed bulb vine fern moss tree",
        verbs="water prune weed transplant mulch graft bloom sprout wilt flourish",
        adjs="perennial annual evergreen deciduous flowering shady sunny hardy",
        roles="gardener botanist florist groundskeeper",
    ),
    "ocean": dict(
        fields="marine biology|physical oceanography|fisheries|coastal ecology",
        nouns="reef coral kelp plankton krill squid octopus jellyfish dolphin shark tide current "
        "trench seabed lagoon estuary mangrove shoal buoy sonar trawler net lobster oyster "
        "seaweed starfish sea_urchin upwelling salinity",
        verbs="dive drift spawn filter trawl chart sample bleach shelter forage surface",
        adjs="marine pelagic benthic brackish tidal saline bioluminescent abyssal intertidal",
        roles="marine_biologist diver fisher oceanographer harbourmaster",
    ),
    "textiles": dict(
        fields="weaving|dyeing|tailoring|fashion history|knitting",
        nouns="loom thread yarn wool cotton linen silk fibre spindle needle seam hem pattern "
        "fabric dye indigo madder stitch button collar sleeve cloak tapestry quilt embroidery "
        "bobbin shuttle warp weft",
        verbs="weave spin dye knit stitch sew hem embroider tailor darn felt card",
        adjs="woven knitted embroidered waterproof coarse fine woollen silken threadbare",
        roles="weaver tailor dyer seamstress knitter",
    ),
    "photography": dict(
        fields="film photography|cinematography|darkroom technique|photojournalism",
        nouns="camera shutter aperture exposure tripod negative darkroom emulsion flashbulb "
        "viewfinder portrait frame focus grain contrast filter reel projector studio "
        "spotlight backdrop zoom_lens",
        verbs="photograph develop expose frame focus crop print enlarge film edit",
        adjs="grainy overexposed underexposed sepia panoramic candid cinematic",
        roles="photographer cinematographer editor projectionist",
    ),
    "philosophy": dict(
        fields="ethics|logic|metaphysics|epistemology|aesthetics",
        nouns="argument premise conclusion virtue duty paradox dilemma belief knowledge truth "
        "justice freedom consciousness doubt syllogism fallacy thought_experiment dialogue "
        "principle certainty",
        verbs="reason argue doubt infer justify deduce contemplate question refute reflect",
        adjs="ethical logical metaphysical rational sceptical moral abstract paradoxical",
        roles="philosopher logician ethicist student",
    ),
    "electronics": dict(
        fields="circuit design|signal processing|embedded systems|radio engineering",
        nouns="resistor capacitor transistor diode inductor oscillator amplifier antenna "
        "microcontroller breadboard solder multimeter oscilloscope relay fuse transformer "
        "semiconductor wafer firmware voltage_regulator",
        verbs="solder wire ground amplify rectify modulate demodulate calibrate flash short",
        adjs="analog digital solid-state programmable low-power wireless grounded",
        roles="electrician technician hobbyist radio_operator",
    ),
}

# Words that fit any subject (subjects of sentences, connectors, evaluations).
GENERAL_NOUNS = (
    "idea example method result question answer problem reason process system pattern "
    "change effect cause difference detail step stage part piece feature property "
    "measurement observation record report study survey source account history origin "
    "purpose principle rule exception case sample model tool technique approach "
    "experiment argument claim view evidence limit range scale rate level amount number "
    "group community family village neighbourhood project plan schedule season morning "
    "evening week month year decade century moment afternoon weekend journey path road "
    "window door table chair lamp notebook letter map picture photograph story "
    "habit routine skill talent career hobby festival holiday tradition custom ceremony "
    "neighbour friendship conversation argument promise secret surprise mistake lesson "
    "memory treasure puzzle riddle mystery adventure voyage expedition discovery invention "
    "machine device gadget instrument engine motor battery cable switch sensor button "
    "factory workshop warehouse office market shop bakery pharmacy library museum theatre "
    "cinema stadium hospital prison barracks monastery temple cathedral chapel palace "
    "cottage cabin tent shelter bridge tunnel harbour lighthouse canal fountain statue "
    "meadow forest orchard swamp marsh pond stream waterfall glacier volcano island shore"
).split()

GENERAL_ADJS = (
    "important common rare simple complex useful careful small large early late recent "
    "modern traditional local regional national international practical theoretical "
    "basic advanced accurate precise rough gradual sudden steady surprising typical "
    "unusual familiar obvious subtle clear uncertain reliable fragile durable narrow "
    "broad deep shallow quiet loud bright dark warm cold heavy light quick slow "
    "peculiar remarkable ordinary curious cautious generous humble stubborn graceful clumsy "
    "elegant awkward brilliant dull fierce gentle honest loyal patient restless sincere "
    "tidy messy vivid pale smooth rough sharp blunt hollow solid tiny enormous ancient "
    "fresh stale famous obscure wealthy modest urgent leisurely frequent occasional"
).split()

GENERAL_VERBS = (
    "explain describe show suggest study measure compare test observe record notice "
    "change improve reduce increase affect support follow allow require produce create "
    "build collect share discover explore protect reveal connect replace combine "
    "separate organize plan choose decide identify examine consider illustrate "
    "admire borrow celebrate complain deliver encourage gather hesitate imagine inspect "
    "investigate justify maintain negotiate persuade predict publish question recommend "
    "repair rescue resolve restore summarize translate wander whisper witness"
).split()

ADVERBS = (
    "often usually rarely sometimes gradually quickly slowly carefully roughly nearly "
    "largely mostly partly widely closely directly eventually frequently typically "
    "generally particularly especially surprisingly"
).split()

CONNECTORS = """
However,
For example,
In practice,
As a result,
In addition,
By contrast,
At the same time,
In many cases,
Historically,
Today,
In short,
For this reason,
Surprisingly,
On the other hand,
Even so,
In other words,
Over time,
Most of the time,
Because of this,
Put simply,
""".strip().splitlines()  # sentence openers, one per line

COLOURS = "red orange yellow green blue violet grey brown white black amber crimson teal".split()
ANIMALS = (
    "fox heron otter badger sparrow salmon beetle moth wolf hare owl lynx crow trout "
    "tortoise gecko falcon seal whale deer"
).split()
OBJECTS = (
    "lantern kettle compass ladder basket blanket coin key ribbon candle bell mirror "
    "clock satchel umbrella rope spoon jar envelope badge"
).split()

# Syllables for invented names: people, places, plants, institutions.
NAME_ONSETS = (
    "b br bl c ch cl cr d dr f fl fr g gr gl h j k kh l m n p pr pl qu r s sh sk sl sn "
    "sp st sw t th tr tw v w wr y z zh al an ar el em er il or ul"
).split()
NAME_VOWELS = "a e i o u ai ea ie io ou y ae".split()
NAME_CODAS = ["", "", "", "n", "r", "l", "s", "th", "nd", "rk", "m", "x", "v", "ss", "lt", "ck", "ng", "st", "rn", "d"]
SURNAME_ENDINGS = (
    "son sen ford wick ley ton berg stein ez ini ova ski ard well more field man hart worth mont eau quist"
).split()
PLACE_ENDINGS = (
    "ford mere heim ville stad ora ia bury haven gate dale holm wick thorpe polis vik kirk mouth bridge field"
).split()
NAME_ACCENTED = ["é", "ö", "å", "ñ", "ü", "ç", "ø"]

MONTHS = ("January February March April May June July August September October November December").split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

# unit, low, high, decimals: quantities drawn from a plausible range
_UNIT_ROWS = """
km          1   900 0
m           1   500 1
cm          1    90 1
mm          1    50 1
kg          1   400 1
g           1   900 0
L           1    60 1
mL          5   750 0
°C        -30    45 0
%           1    99 0
hours       2    72 0
minutes     2    90 0
years       2   400 0
km/h        5   300 0
hectares    2  5000 0
tonnes      2  9000 0
MHz         1   900 1
V           1   240 0
"""
UNITS = [
    (unit, int(low), int(high), int(decimals))
    for unit, low, high, decimals in map(str.split, _UNIT_ROWS.strip().splitlines())
]

# Morphemes for coined technical terms ("hydrolith", "chronoscope") and derived words.
TERM_ROOTS = (
    "hydro thermo litho chrono photo bio geo neuro cardio electro magneto astro helio baro "
    "petro myco phyto zoo aero cryo hemo osteo dendro xylo pyro seismo hygro tropo strato "
    "meso proto poly mono iso para tele micro macro pseudo "
    "angio arthro chloro cyano erythro glyco halo hetero homo hypso ichthyo kerato "
    "leuko melano necro oligo ortho paleo ptero rhizo sclero spectro thallo"
).split()
TERM_SUFFIXES = (
    "meter graph logy scope genesis lysis phyte cyte sphere lith plast therm stat phore "
    "gen morph tope kinesis philia tron nomy sis "
    "blast clast derm gram lite mer pod saur tomy trophy zoic"
).split()
DERIVING_PREFIXES = ["non-", "semi-", "un", "re", "sub", "over", "under", "multi", "inter", "counter", "pre", "post"]
NOUN_SUFFIXES = ["-like", "-based", "-free", "-rich", "-shaped", "-sized"]
